package driver_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"example.com/dlock/driver"
)

// TestRegisterAndOpenDoc pins Register's and Open's doc comments: a second
// registration of a scheme (in another case) and a nil opener panic; Open
// matches the scheme in any case; an unparsable URL or an unknown scheme is
// ErrInvalid without the URL's password in the text. The control is the
// registered scheme, which opens.
func TestRegisterAndOpenDoc(t *testing.T) {
	opened := &driver.Opened{Describe: "doc-test store", Close: func() error { return nil }}
	driver.Register("doc-test", func(context.Context, *url.URL) (*driver.Opened, error) { return opened, nil })
	panics := func(f func()) (p bool) {
		defer func() { p = recover() != nil }()
		f()
		return false
	}
	if !panics(func() {
		driver.Register("DOC-TEST", func(context.Context, *url.URL) (*driver.Opened, error) { return nil, nil })
	}) {
		t.Error("a second Register of the scheme (upper case) did not panic")
	}
	if !panics(func() { driver.Register("doc-test-nil", nil) }) {
		t.Error("Register with a nil opener did not panic")
	}
	ctx := context.Background()
	if o, err := driver.Open(ctx, "DOC-TEST://host"); err != nil || o != opened {
		t.Errorf("Open in upper case = %v, %v; want the registered opener's store (control)", o, err)
	}
	for _, raw := range []string{"nosuch://user:hunter2@host", "doc-test://user:hunter2@host:bad port/"} {
		_, err := driver.Open(ctx, raw)
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q)'s error shows the password: %v", raw, err)
		}
	}
}
