package faulttest

import (
	"context"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// LockBuyer returns the buy function of the lease and session modes and
// what closes it: a dlock Client on store locks key (renewed every 2 s)
// and, holding the lease, runs sell; the lease is released after. The
// closer closes the Client, then calls closeStore if not nil (the store
// itself, for a session store). It fails only if the Client cannot be
// made.
func LockBuyer(store driver.Mutex, closeStore func(context.Context), key string, sell func(ctx context.Context, l *dlock.Lease, buyer string) (bool, error)) (BuyFunc, func(), error) {
	c, err := dlock.New(store)
	if err != nil {
		return nil, nil, err
	}
	closeFn := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
		if closeStore != nil {
			closeStore(ctx)
		}
	}
	return func(ctx context.Context, b string) (bool, error) {
		l, err := c.Lock(ctx, key, dlock.WithAutoRenew(2*time.Second))
		if err != nil {
			return false, err
		}
		defer func() { _ = l.Release(context.WithoutCancel(ctx)) }()
		return sell(ctx, l, b)
	}, closeFn, nil
}

// Retry returns buy retried as an application retries a request the
// faults failed: up to attempts calls while it returns an error and ctx
// has not ended, with a backoff of 20 ms times the attempt between them.
// It returns the last call's answer.
func Retry(attempts int, buy BuyFunc) BuyFunc {
	return func(ctx context.Context, b string) (sold bool, err error) {
		for attempt := 1; attempt <= attempts; attempt++ {
			if sold, err = buy(ctx, b); err == nil || ctx.Err() != nil {
				break
			}
			if attempt < attempts {
				time.Sleep(time.Duration(attempt) * 20 * time.Millisecond) // the retry's backoff
			}
		}
		return sold, err
	}
}
