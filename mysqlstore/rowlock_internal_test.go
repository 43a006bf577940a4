package mysqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestRowErrDeadlineRace: the server's lock wait timeout (WAIT n, from
// ctx's deadline rounded up) can answer as the deadline passes, before or
// after ctx's timer fires (seen once in the full suite with a 2 s
// deadline). Either way the error matches ErrNotAcquired and
// DeadlineExceeded, and stays a *driver.ContendedError when the server
// answered; with ctx alive a contention is only that.
func TestRowErrDeadlineRace(t *testing.T) {
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	contended := &driver.ContendedError{Remaining: -1}
	err := rowErr(past, "k", "lock", contended)
	var ce *driver.ContendedError
	if !errors.Is(err, driver.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ce) {
		t.Fatalf("lock wait timeout as the deadline passed: %v", err)
	}
	err = rowErr(past, "k", "lock", context.DeadlineExceeded)
	if !errors.Is(err, driver.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx's deadline: %v", err)
	}
	if err := rowErr(context.Background(), "k", "lock", contended); err != error(contended) {
		t.Fatalf("contended with ctx alive: %v", err)
	}
	other := errors.New("boom")
	if err := rowErr(context.Background(), "k", "lock", other); errors.Is(err, driver.ErrNotAcquired) || !errors.Is(err, other) {
		t.Fatalf("another error with ctx alive: %v", err)
	}
}
