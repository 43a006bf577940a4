package dlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// Log what the Client's locks go through with log/slog: a loss at Warn,
// acquisitions and releases at Debug (not shown at the default level).
func ExampleSlogObserver() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := dlock.New(memstore.New(nil), dlock.WithObserver(dlock.SlogObserver(logger)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(context.Background())
	err = c.Do(context.Background(), "orders/42", func(ctx context.Context) error {
		return nil // the protected work
	})
	fmt.Println(err)
	// Output: <nil>
}

// An Observer of its own: count the waits by outcome. It must not block
// and must not call back into the Client.
func ExampleObserverFunc() {
	counts := map[dlock.Outcome]int{}
	count := dlock.ObserverFunc(func(_ context.Context, e dlock.Event) {
		if e.Type == dlock.EventWaitEnd {
			counts[e.Outcome]++ // on the caller's goroutine: one here, else guard counts with a mutex
		}
	})
	c, err := dlock.New(memstore.New(nil), dlock.WithObserver(count))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	l, err := c.Lock(ctx, "k")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = c.TryLock(ctx, "k") // held: contended
	fmt.Println(err != nil)
	_ = l.Release(ctx)
	fmt.Println(counts[dlock.OutcomeAcquired], counts[dlock.OutcomeContended])
	// Output:
	// true
	// 1 1
}
