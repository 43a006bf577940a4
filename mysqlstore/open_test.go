package mysqlstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestOpenURL opens both modes from mysql:// URLs on the shared server
// (migrate=1 creates the schema), takes and releases a key through each,
// and checks that Describe hides the password.
func TestOpenURL(t *testing.T) {
	s := shared(t)
	table := uniqTable(t)
	for _, mode := range []string{"lease", "session"} {
		o, err := driver.Open(ctxT(t), s.URL()+"?migrate=1&table="+table+"&mode="+mode)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if strings.Contains(o.Describe, "dlock-test") || !strings.Contains(o.Describe, "mode "+mode) {
			t.Fatalf("Describe %q", o.Describe)
		}
		g, err := o.Store.Acquire(ctxT(t), "k", "tok", time.Second)
		if err != nil || g.Fence == 0 {
			t.Fatalf("%s acquire: %+v %v", mode, g, err)
		}
		if err := o.Store.Release(ctxT(t), "k", "tok"); err != nil {
			t.Fatal(err)
		}
		if _, isSession := o.Store.(*mysqlstore.Session); isSession != (mode == "session") {
			t.Fatalf("%s opened a %T", mode, o.Store)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenURLInvalid: malformed URLs are ErrInvalid before any I/O.
func TestOpenURLInvalid(t *testing.T) {
	for _, u := range []string{
		"mysql:///db", "mysql://h:99999/db", "mysql://h/", "mysql://h/a/b",
		"mysql://h/db?mode=queue", "mysql://h/db?table=1bad", "mysql://h/db?nope=1",
		"mysql://h/db?max-conns=0", "mysql://h/db?migrate=maybe", "mysql://h/db?table=a&table=b",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := driver.Open(ctx, u)
		cancel()
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", u, err)
		}
	}
}
