package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// Extend sets the key's expiry in the store to ttl from now, shorter or
// longer than before, and moves ValidUntil to match, back as well as forward.
// Leases taken with WithTTL need it to last longer; automatically renewed
// leases extend themselves, and after Extend they renew with ttl, every
// ttl/3, so that renewal never shrinks what Extend set.
//
// Calls that set the key's expiry, Extend and automatic renewal, run one at
// a time for each lease, so that the validity always follows the expiry set
// in the store last: Extend first waits, as long as ctx allows, for one
// already under way.
//
// If the store says the lock is no longer held, or the lease was lost while
// the call was under way, the lease is lost and Extend returns an error
// matching ErrLost (Release still gives the store back its hold). If the
// store cannot be reached or ctx ends first, Extend returns an error
// matching ErrUnavailable; the lease keeps its current validity, cut to what
// ttl would give if ttl is shorter (the call may have been applied). Invalid
// ttl values, and values outside the store's bounds (driver.Model), return
// an error matching ErrInvalid before any I/O, and change nothing. The store
// is asked for ttl rounded up to its granularity; on a session-based store,
// for its SessionTTL whatever ttl says (Extend then renews the session).
// A nil ctx returns an error matching ErrInvalid; a lease already released
// or lost returns what Err reports (ErrNotHeld, ErrLost), without I/O.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	cfg := config{ttl: ttl, wait: -1, backoff: l.c.cfg.backoff, clock: l.c.cfg.clock}
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := fitModel(l.c.model, &ttl); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return err
	}
	if err := l.v.BeginCall(ctx); err != nil {
		if errors.Is(err, lease.ErrCallWait) {
			return fmt.Errorf("%w: lock %q: %w", ErrUnavailable, l.key, err)
		}
		return err
	}
	start := l.v.Now()
	g, err := l.c.store.Extend(ctx, l.key, l.token, ttl)
	if err = l.settle(start, ttl, g, classify(err)); err == nil {
		l.c.renewer.Retune(l.renewable(), ttl)
	}
	return err
}

// tryBeginCall marks a call under way, unless one is already or the lease
// ended; it reports whether it did, and the TTL and validity to renew with.
func (l *Lease) tryBeginCall() (ttl time.Duration, validUntil time.Time, ok bool) {
	return l.v.TryBeginCall()
}

// settle applies the outcome of a call begun with beginCall or tryBeginCall
// (see lease.Validity.Settle) and returns the call's error, or the lease's
// if it ended.
func (l *Lease) settle(start time.Time, ttl time.Duration, g driver.Grant, err error) error {
	return l.v.Settle(l.holder(), start, ttl, g.TTL, err)
}
