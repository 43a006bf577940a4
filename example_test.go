package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// The usual shape: Do runs a critical section under the lock, renews the
// lease while it runs, and cancels its context if the lock is lost.
// memstore stands in for Redis here; see package redisstore.
func ExampleClient_Do() {
	locks, _ := dlock.New(memstore.New(nil))
	stock := 100

	err := locks.Do(context.Background(), "stock:10000", func(ctx context.Context) error {
		stock-- // read-modify-write, protected
		return nil
	})
	fmt.Println(stock, err)
	// Output: 99 <nil>
}

// TryLock makes one attempt and reports contention as ErrNotAcquired.
func ExampleClient_TryLock() {
	ctx := context.Background()
	locks, _ := dlock.New(memstore.New(nil))

	held, _ := locks.Lock(ctx, "report")
	defer held.Release(ctx)

	_, err := locks.TryLock(ctx, "report")
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired))
	// Output: true
}

// WithWait bounds the wait separately from the lease (Redisson's
// tryLock(wait, lease)); the context can still end it earlier.
func ExampleWithWait() {
	ctx := context.Background()
	locks, _ := dlock.New(memstore.New(nil))

	held, _ := locks.Lock(ctx, "job", dlock.WithTTL(time.Minute))
	defer held.Release(ctx)

	_, err := locks.Lock(ctx, "job", dlock.WithWait(20*time.Millisecond), dlock.WithTTL(5*time.Second))
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded))
	// Output: true false
}

// Fencing tokens let the protected resource refuse a holder that lost its
// lock without noticing (a process paused past its lease).
func ExampleFenceGate() {
	ctx := context.Background()
	locks, _ := dlock.New(memstore.New(nil))
	var gate dlock.FenceGate

	first, _ := locks.Lock(ctx, "account")
	_ = first.Release(ctx)
	second, _ := locks.Lock(ctx, "account")
	defer second.Release(ctx)

	fmt.Println(gate.Admit("account", second.Fence(), nil))
	err := gate.Admit("account", first.Fence(), nil) // the stale holder's late write
	fmt.Println(errors.Is(err, dlock.ErrStaleFence))
	// Output:
	// <nil>
	// true
}

// Nested calls with the owner's context re-enter the lock.
func ExampleContextWithOwner() {
	ctx := dlock.ContextWithOwner(context.Background(), dlock.NewOwner())
	locks, _ := dlock.New(memstore.New(nil))

	outer, _ := locks.Lock(ctx, "tree")
	inner, _ := locks.Lock(ctx, "tree")
	fmt.Println(outer.Holds(), inner.Holds(), outer.Fence() == inner.Fence())
	_ = inner.Release(ctx)
	_ = outer.Release(ctx)
	// Output: 1 2 true
}

// A lease ends either by Release or by loss; Done and Err tell which.
func ExampleLease_Done() {
	ctx := context.Background()
	locks, _ := dlock.New(memstore.New(nil))

	l, _ := locks.Lock(ctx, "short", dlock.WithTTL(20*time.Millisecond))
	<-l.Done()
	fmt.Println(errors.Is(l.Err(), dlock.ErrLost), errors.Is(l.Err(), dlock.ErrExpired))
	// Output: true true
}

// WithRead and Commit fold the read and the write of a read-modify-write
// section into the lock's own calls: the value comes with the grant, and
// Commit writes the new one only if the lock is still held, releasing it in
// the same step. memstore keeps the data here (Set, Get); with redisstore
// the resource is a Redis key in the lock's slot, e.g. "stock:{item-42}".
func ExampleLease_Commit() {
	ctx := context.Background()
	store := memstore.New(nil)
	store.Set("stock:{item-42}", "100")
	locks, _ := dlock.New(store)

	l, _ := locks.Lock(ctx, "item-42", dlock.WithRead("stock:{item-42}"))
	v, _ := l.Value()
	n, _ := strconv.Atoi(v)
	err := l.Commit(ctx, strconv.Itoa(n-1)) // ErrLost: the lock was lost, nothing written

	stock, _ := store.Get("stock:{item-42}")
	fmt.Println(stock, err)
	// Output: 99 <nil>
}

// Do's function gets its lease, and so the fencing token, from its context:
// the protected resource can then refuse a paused holder's late write.
func ExampleLeaseFromContext() {
	locks, _ := dlock.New(memstore.New(nil))
	var gate dlock.FenceGate // stands in for the protected resource

	err := locks.Do(context.Background(), "account", func(ctx context.Context) error {
		lease, _ := dlock.LeaseFromContext(ctx)
		fmt.Println("fence", lease.Fence())
		return gate.Admit("account", lease.Fence(), func() error {
			return nil // the write, admitted only with a current fence
		})
	})
	fmt.Println(err)
	// Output:
	// fence 1
	// <nil>
}

// A Client's life ends with Close: it releases what the client still holds
// and refuses later calls. Close it before the store (for redisstore:
// locks.Close, then store.Close, then the go-redis client's Close).
func ExampleClient_Close() {
	ctx := context.Background()
	store := memstore.New(nil)
	locks, _ := dlock.New(store)

	l, _ := locks.Lock(ctx, "job")
	fmt.Println(locks.Close(ctx))
	fmt.Println(errors.Is(l.Err(), dlock.ErrLost))

	_, err := locks.Lock(ctx, "job")
	fmt.Println(errors.Is(err, dlock.ErrInvalid))
	_, err = store.Acquire(ctx, "job", "someone-else", time.Second) // released
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// true
	// <nil>
}
