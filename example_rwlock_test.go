package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// Many readers of a key at once, or one writer alone: RLock and Lock take
// holdings renewed until Release, each a lease of its own, so a reader that
// crashes keeps a writer out no longer than its own lease. A waiting writer
// keeps later readers out. memstore stands in for a server here;
// redisstore.New(rdb, nil) is the other store with read-write locks today.
func Example_rwlock() {
	ctx := context.Background()
	locks, err := dlock.NewRWLocks(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close(ctx)

	r1, err := locks.RLock(ctx, "catalog")
	if err != nil {
		fmt.Println(err)
		return
	}
	r2, err := locks.RLock(ctx, "catalog") // readers share the key
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("two readers, fences", r1.Fence(), r2.Fence())
	r1.Release(ctx)
	r2.Release(ctx)

	err = locks.Do(ctx, "catalog", func(ctx context.Context) error {
		_, err := locks.TryRLock(context.Background(), "catalog") // another reader
		fmt.Println("reader kept out while writing:", errors.Is(err, dlock.ErrNotAcquired))
		return nil
	})
	fmt.Println("write done:", err)

	err = locks.RDo(ctx, "catalog", func(ctx context.Context) error {
		_, err := locks.Lock(ctx, "catalog") // an upgrade: refused at once
		fmt.Println("upgrade refused:", errors.Is(err, dlock.ErrUpgrade))
		return nil
	})
	fmt.Println("read done:", err)
	// Output:
	// two readers, fences 1 2
	// reader kept out while writing: true
	// write done: <nil>
	// upgrade refused: true
	// read done: <nil>
}
