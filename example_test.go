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

// A program makes one Client per store at start-up and closes it before the
// store. memstore stands in for a server here (it locks within one process
// only); with Redis the store is redisstore.New(rdb, nil), closed after the
// Client and before the go-redis client.
func ExampleNew() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil), dlock.WithAutoRenew(15*time.Second))
	if err != nil {
		fmt.Println(err) // ErrInvalid: a nil store, or an option out of range
		return
	}
	defer locks.Close(ctx)

	_, err = dlock.New(memstore.New(nil), dlock.WithTTL(time.Microsecond))
	fmt.Println(errors.Is(err, dlock.ErrInvalid))
	// Output: true
}

// The usual shape: Do runs a critical section under the lock, renews the
// lease while it runs, and cancels its context if the lock is lost.
func ExampleClient_Do() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)
	stock := 100

	err = locks.Do(ctx, "stock:10000", func(ctx context.Context) error {
		stock-- // read-modify-write, protected; ctx ends if the lock is lost
		return nil
	})
	fmt.Println(stock, err)
	// Output: 99 <nil>
}

// Lock returns a Lease to release when done. Release's error says whether
// the lock was held throughout: ErrLost means the work may not have been
// protected.
func ExampleClient_Lock() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	l, err := locks.Lock(ctx, "nightly-report", dlock.WithWait(10*time.Second))
	if err != nil {
		fmt.Println("not acquired:", err) // ErrNotAcquired, and why
		return
	}
	fmt.Println("holding", l.Key(), "with fence", l.Fence())
	// ... the work; pass l.Fence() to the resource, watch l.Done() ...
	if err := l.Release(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: holding nightly-report with fence 1
}

// TryLock makes one attempt and reports contention as ErrNotAcquired.
func ExampleClient_TryLock() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	held, err := locks.Lock(ctx, "report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer held.Release(ctx)

	_, err = locks.TryLock(ctx, "report")
	var ce *dlock.ContendedError
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired), errors.As(err, &ce))
	// Output: true true
}

// WithWait bounds the wait separately from the lease (Redisson's
// tryLock(wait, lease)); the context can still end it earlier.
func ExampleWithWait() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	held, err := locks.Lock(ctx, "job", dlock.WithTTL(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer held.Release(ctx)

	_, err = locks.Lock(ctx, "job", dlock.WithWait(20*time.Millisecond), dlock.WithTTL(5*time.Second))
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded))
	// Output: true false
}

// Fencing tokens let the protected resource refuse a holder that lost its
// lock without noticing (a process paused past its lease).
func ExampleFenceGate() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)
	var gate dlock.FenceGate

	first, err := locks.Lock(ctx, "account")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := first.Release(ctx); err != nil {
		fmt.Println(err)
	}
	second, err := locks.Lock(ctx, "account")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Release(ctx)

	fmt.Println(gate.Admit("account", second.Fence(), func() error { return nil }))
	err = gate.Admit("account", first.Fence(), func() error { return nil }) // the stale holder's late write
	fmt.Println(errors.Is(err, dlock.ErrStaleFence))
	// Output:
	// <nil>
	// true
}

// Nested calls with the owner's context re-enter the lock: one more hold,
// the same fence. Each hold is released once.
func ExampleContextWithOwner() {
	ctx := dlock.ContextWithOwner(context.Background(), dlock.NewOwner())
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	outer, err := locks.Lock(ctx, "tree")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer outer.Release(ctx)
	inner, err := locks.Lock(ctx, "tree")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(outer.Holds(), inner.Holds(), outer.Fence() == inner.Fence())
	fmt.Println(inner.Release(ctx))
	// Output:
	// 1 2 true
	// <nil>
}

// A lease ends either by Release or by loss; Done and Err tell which.
func ExampleLease_Done() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	l, err := locks.Lock(ctx, "short", dlock.WithTTL(20*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	<-l.Done() // a fixed lease, never extended: it runs out
	fmt.Println(errors.Is(l.Err(), dlock.ErrLost), errors.Is(l.Err(), dlock.ErrExpired))
	fmt.Println(errors.Is(l.Release(ctx), dlock.ErrLost)) // the work was not protected throughout
	// Output:
	// true true
	// true
}

// Extend moves a fixed lease's end, here before it runs out.
func ExampleLease_Extend() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	l, err := locks.Lock(ctx, "batch", dlock.WithTTL(time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	if err := l.Extend(ctx, time.Minute); err != nil {
		fmt.Println(err) // ErrLost: the lease is gone; ErrUnavailable: unknown, validity kept
		return
	}
	fmt.Println(l.Remaining() > 30*time.Second)
	fmt.Println(errors.Is(l.Extend(ctx, 0), dlock.ErrInvalid)) // refused before any I/O
	// Output:
	// true
	// true
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
	locks, err := dlock.New(store)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	l, err := locks.Lock(ctx, "item-42", dlock.WithRead("stock:{item-42}"))
	if err != nil {
		fmt.Println(err)
		return
	}
	if !l.ValueRead() { // a store without driver.Atomic: read and write yourself
		fmt.Println("store cannot read with the grant")
		_ = l.Release(ctx)
		return
	}
	v, _ := l.Value()
	n, err := strconv.Atoi(v)
	if err != nil {
		fmt.Println(err)
		_ = l.Release(ctx)
		return
	}
	err = l.Commit(ctx, strconv.Itoa(n-1)) // ErrLost: the lock was lost, nothing written

	stock, _ := store.Get("stock:{item-42}")
	fmt.Println(stock, err)
	// Output: 99 <nil>
}

// Do's function gets its lease, and so the fencing token, from its context:
// the protected resource can then refuse a paused holder's late write.
func ExampleLeaseFromContext() {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)
	var gate dlock.FenceGate // stands in for the protected resource

	err = locks.Do(ctx, "account", func(ctx context.Context) error {
		lease, _ := dlock.LeaseFromContext(ctx) // always found inside Do
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
	locks, err := dlock.New(store)
	if err != nil {
		fmt.Println(err)
		return
	}

	l, err := locks.Lock(ctx, "job")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(locks.Close(ctx))
	fmt.Println(errors.Is(l.Err(), dlock.ErrLost))

	_, err = locks.Lock(ctx, "job")
	fmt.Println(errors.Is(err, dlock.ErrInvalid))
	_, err = store.Acquire(ctx, "job", "someone-else", time.Second) // released
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// true
	// <nil>
}
