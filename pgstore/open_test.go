package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/urltest"
	"example.com/dlock/pgstore"
)

// TestOpen opens the store through the registry under both schemes, with
// migrate=true on a fresh table, and locks through it.
func TestOpen(t *testing.T) {
	s := server(t)
	for _, scheme := range []string{"postgres", "postgresql"} {
		url := strings.Replace(s.URL(), "postgres://", scheme+"://", 1) + "&table=" + "open_" + scheme + "&migrate=true&sweep=1s&application_name=dlocktest"
		o, err := driver.Open(ctx(t), url)
		if err != nil {
			t.Fatalf("Open(%s): %v", scheme, err)
		}
		if !strings.Contains(o.Describe, "open_"+scheme+"_locks") || strings.Contains(o.Describe, "password") {
			t.Errorf("Describe = %q", o.Describe)
		}
		tk := tok()
		if _, err := o.Store.(driver.Mutex).Acquire(ctx(t), "k", tk, time.Minute); err != nil {
			t.Fatalf("%s: Acquire: %v", scheme, err)
		}
		if err := o.Store.(driver.Mutex).Release(ctx(t), "k", tk); err != nil {
			t.Fatalf("%s: Release: %v", scheme, err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Store.(driver.Mutex).Acquire(ctx(t), "k", tk, time.Minute); !errors.Is(err, driver.ErrInvalid) {
			t.Fatalf("Acquire after Close = %v; want ErrInvalid", err)
		}
	}
}

// TestOpenRejects checks that malformed URLs fail with ErrInvalid before any
// connection, and that a missing table is refused (not retried) with a hint.
func TestOpenRejects(t *testing.T) {
	for _, u := range []string{
		"postgres:///db",
		"postgres://h/db?table=Bad-Name",
		"postgres://h/db?mode=row",
		"postgres://h/db?migrate=maybe",
		"postgres://h/db?sweep=soon",
		"postgres://h/db?mode=session&sweep=1s", // the sweep is the lease table's
		"postgres://h/db?table=a&table=b",
	} {
		if _, err := driver.Open(context.Background(), u); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("Open(%q) = %v; want ErrInvalid", u, err)
		}
	}
	s := server(t)
	o, err := driver.Open(ctx(t), s.URL()+"&table=never_migrated")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	_, err = o.Store.(driver.Mutex).Acquire(ctx(t), "k", tok(), time.Minute)
	if !errors.Is(err, driver.ErrRefused) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Acquire on a missing table = %v; want ErrRefused naming Migrate", err)
	}
	if _, err := pgstore.New(nil, pgstore.Options{}); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("New(nil) = %v", err)
	}
}

// TestOpenHidesPassword: pgx quotes the connection string in its parse
// errors; the opener's error keeps the ErrInvalid match and the parameter's
// reason, and never the URL's password (docs/cli.md: passwords never
// appear in dlock's messages). pgx v5.12 masks the password itself and the
// opener's redact masks it again, so the test pins the promise whichever
// layer keeps it.
func TestOpenHidesPassword(t *testing.T) {
	const pw = "s3cret-pw"
	_, err := driver.Open(context.Background(), "postgres://app:"+pw+"@db.example:5432/app?sslmode=bogus")
	if !errors.Is(err, driver.ErrInvalid) || !strings.Contains(err.Error(), "sslmode") || strings.Contains(err.Error(), pw) {
		t.Fatalf("Open with sslmode=bogus = %v; want ErrInvalid naming sslmode, without the password", err)
	}
}

// TestOpenUnknownParameter: a parameter neither pgstore's nor pgx's (a
// misspelt table=) is refused before any connection with ErrInvalid naming
// it and the accepted ones (pgx would send it to the server as a setting,
// whose refusal at the first connection read as "cannot reach"), and so is
// a parameter of the other mode.
func TestOpenUnknownParameter(t *testing.T) {
	urltest.Refuses(t, "postgres://u:secret@127.0.0.1:1/db?tabel=x", "tabel", `unknown parameter "tabel"`, "table; ", "sslmode")
	urltest.Refuses(t, "postgres://u:secret@127.0.0.1:1/db?mode=session&sweep=1s", "sweep", "applies to mode=lease")
	urltest.Refuses(t, "postgres://u:secret@127.0.0.1:1/db?mode=lease&mode=lease", "mode", "given 2 times")
}
