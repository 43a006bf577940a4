package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// At most 3 workers of a key at once: each Acquire takes permits of the
// key's semaphore, renewed until Release. A worker that crashes gives its
// permits back at the end of its own lease. memstore stands in for a server
// here; redisstore.New(rdb, nil) is the other store with semaphores today.
func Example_semaphore() {
	ctx := context.Background()
	sems, err := dlock.NewSemaphores(memstore.New(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sems.Close(ctx)

	p, err := sems.Acquire(ctx, "encoders", 3, 2) // 2 of 3 permits, all at once
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("holding", p.Permits(), "permits, fence", p.Fence())

	_, err = sems.TryAcquire(ctx, "encoders", 3, 2) // only 1 is free
	fmt.Println("second try taken:", errors.Is(err, dlock.ErrNotAcquired))

	_, err = sems.TryAcquire(ctx, "encoders", 4, 1) // the key's limit is 3
	fmt.Println("other limit invalid:", errors.Is(err, dlock.ErrInvalid))

	if err := p.Release(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// holding 2 permits, fence 1
	// second try taken: true
	// other limit invalid: true
}
