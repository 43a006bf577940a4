package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"example.com/dlock/driver"
)

// The store driver.Open returns offers the row lock as driver.RowLocker, in
// both modes, on its table prefix: NOWAIT refuses a row held by another
// transaction with ErrNotAcquired without running fn, and a free row runs
// fn. The control: a row of another key is free meanwhile.
func TestRowLockCapability(t *testing.T) {
	srv := server(t)
	table := uniqTable(t, newPool(t))
	for _, mode := range []string{"lease", "session"} {
		t.Run(mode, func(t *testing.T) {
			o, err := driver.Open(driver.WithOpenHints(ctx(t), driver.OpenHints{Conns: 8}), srv.URL()+"&table="+table+"&mode="+mode)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			rl, ok := driver.As[driver.RowLocker](o.Store)
			if !ok {
				t.Fatalf("%T has no driver.RowLocker", o.Store)
			}
			checkRowLocker(t, rl, t.Name())
		})
	}
}

// checkRowLocker holds key's row and, inside, tries it again with NoWait
// (refused, fn not run) and another key's row (free).
func checkRowLocker(t *testing.T, rl driver.RowLocker, key string) {
	t.Helper()
	nowait := driver.RowLockOptions{NoWait: true}
	ran := 0
	err := rl.WithRowLock(ctx(t), key, driver.RowLockOptions{}, func(c context.Context) error {
		ran++
		err := rl.WithRowLock(c, key, nowait, func(context.Context) error { ran += 10; return nil })
		if !errors.Is(err, driver.ErrNotAcquired) {
			t.Errorf("a held row with NoWait: %v, want ErrNotAcquired", err)
		}
		return rl.WithRowLock(c, key+"-other", nowait, func(context.Context) error { ran += 100; return nil })
	})
	if err != nil || ran != 101 {
		t.Fatalf("err %v, ran %d, want nil and 101 (outer and the other key, not the refused one)", err, ran)
	}
	if err := rl.WithRowLock(ctx(t), "", nowait, func(context.Context) error { return nil }); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("empty key: %v, want ErrInvalid", err)
	}
}

// OpenHints.NoIO opens without a network call: migrate=true is skipped on
// a server that is not there (port 1), which it would try to reach
// otherwise.
func TestOpenNoIO(t *testing.T) {
	const url = "postgres://u:secret@127.0.0.1:1/app?sslmode=disable&migrate=true&connect_timeout=2"
	o, err := driver.Open(driver.WithOpenHints(context.Background(), driver.OpenHints{NoIO: true}), url)
	if err != nil {
		t.Fatalf("NoIO: %v", err)
	}
	_ = o.Close()
	if o, err := driver.Open(context.Background(), url); err == nil {
		_ = o.Close()
		t.Fatal("control: migrate=true without NoIO opened without a server")
	}
}
