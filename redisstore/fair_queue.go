package redisstore

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
)

// leaveTimeout bounds the call that takes a waiter out of the queue after
// it gave up: past it the entry is left to its waiter lease.
const leaveTimeout = 2 * time.Second

// AcquireQueued implements driver.Queuer. It tries once, joining the
// queue (fair.lua) if the key is not granted, then subscribes to the key's
// release channel and waits for the head of the queue to be its own place
// and the lock free: it tries again at once, then when a release or an
// eviction is announced, when the holder's lease ends, and at least every
// third of the waiter lease, each try renewing its waiter lease. Without a
// subscription (Subscribe failed) it waits by those timers alone. When ctx
// ends, or a call fails, it takes its entry out of the queue, and the hold
// of its last call if that call was granted without a reply
// (fair_leave.lua), and returns ctx's error or the call's; if that clean-up
// call fails too, the entry ends with its waiter lease. A holder's re-entry
// is granted at once. A bad key is refused as by Acquire.
func (f *FairStore) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	call := callID()
	g, err := f.try(ctx, key, token, ttl, call, true)
	var ce *driver.ContendedError
	if err == nil || !errors.As(err, &ce) {
		if err != nil {
			f.leave(ctx, key, token, call)
		}
		return g, err
	}
	wake, unsubscribe, err := f.s.Subscribe(ctx, key)
	switch {
	case err == nil:
		defer unsubscribe()
	case ctx.Err() != nil:
		f.leave(ctx, key, token, call)
		return driver.Grant{}, ctx.Err()
	}
	return f.wait(ctx, key, token, ttl, wake)
}

// wait is AcquireQueued's loop once subscribed (wake nil if not): a try,
// then a wait for wake, the holder's expiry or the renewal period.
func (f *FairStore) wait(ctx context.Context, key, token string, ttl time.Duration, wake <-chan struct{}) (driver.Grant, error) {
	renew := f.lease / 3
	timer := time.NewTimer(renew)
	defer timer.Stop()
	for {
		call := callID()
		g, err := f.try(ctx, key, token, ttl, call, true)
		var ce *driver.ContendedError
		if err == nil {
			return g, nil
		} else if !errors.As(err, &ce) {
			f.leave(ctx, key, token, call)
			return driver.Grant{}, err
		}
		next := renew
		if ce.Remaining >= 0 {
			next = min(next, ce.Remaining+time.Millisecond)
		}
		timer.Reset(next)
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			f.leave(ctx, key, token, call)
			return driver.Grant{}, ctx.Err()
		}
	}
}

// leave runs fair_leave.lua for token's last call, on a context that
// outlives ctx's cancellation by leaveTimeout at most.
func (f *FairStore) leave(ctx context.Context, key, token string, call any) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	queue, waiters := f.QueueKeys(key)
	_ = fairLeaveScript.Run(lctx, f.s.client, []string{f.s.lock(key), queue, waiters},
		token, call, f.s.channel(key), f.s.keep).Err()
}
