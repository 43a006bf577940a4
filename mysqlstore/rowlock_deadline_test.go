package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestRowLockDeadlineIsNotAcquired (issue 23): while another transaction
// holds the row, a wait bounded by a deadline that is not a whole number of
// seconds (1.5 s) or is one (2 s) ends at the deadline with an error
// matching both driver.ErrNotAcquired and context.DeadlineExceeded, fn not
// run: the server's WAIT n is rounded up, so ctx fires first; also on the
// IdleTimeout path (a connection of its own). Before the fix it ended
// with "mysqlstore: row lock: context deadline exceeded", matching no
// sentinel (the control: the test run on that code fails).
func TestRowLockDeadlineIsNotAcquired(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- mysqlstore.WithRowLock(ctxT(t), db, "k", mysqlstore.RowLockOptions{Table: opts.Table}, func(*sql.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	for _, c := range []struct {
		d    time.Duration
		idle time.Duration
	}{{1500 * time.Millisecond, 0}, {2 * time.Second, 0}, {1500 * time.Millisecond, 10 * time.Second}} {
		t.Run(fmt.Sprintf("deadline=%v,idle=%v", c.d, c.idle), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), c.d)
			defer cancel()
			ran, start := false, time.Now()
			err := mysqlstore.WithRowLock(ctx, db, "k", mysqlstore.RowLockOptions{Table: opts.Table, IdleTimeout: c.idle},
				func(*sql.Tx) error { ran = true; return nil })
			took := time.Since(start)
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
			if !errors.Is(err, driver.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || ran {
				t.Fatalf("wait bounded by %v on a held row: %v (fn ran %v); want ErrNotAcquired and DeadlineExceeded", c.d, err, ran)
			}
			if took < c.d || took > c.d+time.Second {
				t.Fatalf("ended after %v, want about %v", took, c.d)
			}
		})
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
