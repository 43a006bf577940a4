package drivertest_test

import (
	"context"
	"errors"
	"slices"
	"time"

	"example.com/dlock/driver"
)

// AcquireQueued implements driver.Queuer: a FIFO of tokens per key; the
// head takes the key when it is free (released, or its lease ended).
func (r *refStore) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	r.mu.Lock()
	if r.mut == queueLIFO {
		r.queues[key] = append([]string{token}, r.queues[key]...)
	} else {
		r.queues[key] = append(r.queues[key], token)
	}
	for {
		wait := time.Hour
		if r.queues[key][0] == token {
			g, err := r.acquire(key, token, ttl)
			if err == nil {
				r.dequeue(key, token)
				r.mu.Unlock()
				return g, nil
			}
			var ce *driver.ContendedError
			if errors.As(err, &ce) && ce.Remaining > 0 {
				wait = ce.Remaining
			}
		}
		changed := r.changed
		r.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			r.mu.Lock()
			r.dequeue(key, token)
			r.mu.Unlock()
			return driver.Grant{}, ctx.Err()
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
		r.mu.Lock()
	}
}

// dequeue removes token from key's queue and wakes the others. Called with
// r.mu held.
func (r *refStore) dequeue(key, token string) {
	q := r.queues[key]
	if i := slices.Index(q, token); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(r.queues, key)
	} else {
		r.queues[key] = q
	}
	close(r.changed)
	r.changed = make(chan struct{})
}
