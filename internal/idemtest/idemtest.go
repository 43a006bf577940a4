// Package idemtest is the test kit shared by the idempotency guard's
// store-level tests (idemhttp on memstore and Redis, redisstore, pgstore,
// mysqlstore): the same scenario, one copy, run on every store. A store's
// tests pass a store URL (driver.Open) or a function that opens a client,
// and, for a child process, the start of their test binary's payer role;
// what a store is stays in its tests.
//
//   - Twenty: 20 identical HTTP requests at once on two instances of
//     idemhttp sharing a store.
//   - CrashAfterCharge: an executor process, opened on the store's URL,
//     charges a fake provider and is killed or paused before completing.
//   - LostReplies: Guards behind the fault proxy under seeded faults.
package idemtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// OpenURL opens the idempotency store at url (driver.Open: the store's
// package must be linked in), closed when t ends.
func OpenURL(t testing.TB, url string) driver.Idempotency {
	t.Helper()
	s, closeFn, err := openURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeFn() })
	return s
}

// openURL opens the idempotency store at url and returns what closes it.
func openURL(ctx context.Context, url string) (driver.Idempotency, func() error, error) {
	o, err := driver.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	s, ok := o.Store.(driver.Idempotency)
	if !ok {
		_ = o.Close()
		return nil, nil, fmt.Errorf("%w: %s keeps no idempotency records", driver.ErrInvalid, o.Describe)
	}
	return s, o.Close, nil
}

// ctxFor is a context for one scenario: a minute at most, ended with t.
func ctxFor(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}
