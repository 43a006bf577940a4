package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// A memstore behind a dlock Client, as in a unit test of code that locks:
// two Clients on one store exclude each other as two processes would on a
// server.
func ExampleNew() {
	ctx := context.Background()
	store := memstore.New(nil)
	a, err := dlock.New(store)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close(ctx)
	b, err := dlock.New(store)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close(ctx)

	l, err := a.Lock(ctx, "job")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	_, err = b.TryLock(ctx, "job")
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired))
	// Output: true
}

// A clock of the test's own makes expiry deterministic: the store expires
// leases on the now function it was given.
func ExampleNew_clock() {
	ctx := context.Background()
	now := time.Unix(0, 0)
	store := memstore.New(func() time.Time { return now })

	if _, err := store.Acquire(ctx, "k", "token-1", time.Second); err != nil {
		fmt.Println(err)
		return
	}
	now = now.Add(2 * time.Second) // the lease has run out
	_, err := store.Extend(ctx, "k", "token-1", time.Second)
	fmt.Println(errors.Is(err, dlock.ErrNotHeld), errors.Is(err, dlock.ErrExpired))
	// Output: true true
}

// Set and Get stand in for the data store, so that code using WithRead and
// Lease.Commit can be tested without a server.
func ExampleStore_Set() {
	ctx := context.Background()
	store := memstore.New(nil)
	store.Set("balance", "10")
	locks, err := dlock.New(store)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	l, err := locks.Lock(ctx, "account", dlock.WithRead("balance"))
	if err != nil {
		fmt.Println(err)
		return
	}
	v, found := l.Value()
	fmt.Println(v, found)
	if err := l.Commit(ctx, "15"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(store.Get("balance"))
	// Output:
	// 10 true
	// 15 true
}
