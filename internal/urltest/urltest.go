// Package urltest checks the stores' URL openers the same way: a parameter
// they refuse is refused before any network call, with an error matching
// driver.ErrInvalid that names it.
package urltest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Refuses opens rawURL with driver.Open (its host need not exist: the
// refusal comes first, within a second) and fails t unless the error is a
// *driver.ParamError for param whose message holds every string of says
// and none of the URL's password.
func Refuses(t *testing.T, rawURL, param string, says ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	o, err := driver.Open(ctx, rawURL)
	if err == nil {
		_ = o.Close()
		t.Errorf("Open(%s) succeeded; want %s= refused", rawURL, param)
		return
	}
	var pe *driver.ParamError
	if !errors.Is(err, driver.ErrInvalid) || !errors.As(err, &pe) || pe.Param != param {
		t.Errorf("Open(%s) = %v; want a driver.ParamError for %s=", rawURL, err, param)
		return
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Open(%s) = %v; want it to say %q", rawURL, err, s)
		}
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("Open(%s) = %v: the password shows", rawURL, err)
	}
	if strings.ContainsAny(err.Error(), "\n\t") {
		t.Errorf("Open(%s) = %q: want one line", rawURL, err)
	}
}
