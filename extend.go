package dlock

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
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
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	cfg := config{ttl: ttl, wait: -1, backoff: l.c.cfg.backoff, clock: l.clock}
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := fitModel(l.c.model, &ttl); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return err
	}
	if err := l.beginCall(ctx); err != nil {
		return err
	}
	start := l.clock.Now()
	g, err := l.c.store.Extend(ctx, l.key, l.token, ttl)
	if err = l.settle(start, ttl, g, classify(err)); err == nil {
		l.c.renewer.Retune(l.renewable(), ttl)
	}
	return err
}

// beginCall waits until no call that sets the key's expiry is under way for
// this lease, then marks one. It fails if the lease ended or ctx did first.
func (l *Lease) beginCall(ctx context.Context) error {
	l.mu.Lock()
	for l.calling && l.err == nil {
		if l.callDone == nil {
			l.callDone = make(chan struct{}) // only when calls meet: rare
		}
		ch := l.callDone
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: lock %q: waiting for the renewal under way: %w", ErrUnavailable, l.key, context.Cause(ctx))
		}
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.calling = true
	return nil
}

// tryBeginCall marks a call under way, unless one is already or the lease
// ended; it reports whether it did, and the TTL and validity to renew with.
func (l *Lease) tryBeginCall() (ttl time.Duration, validUntil time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calling || l.err != nil {
		return 0, time.Time{}, false
	}
	l.calling = true
	return l.curTTL, l.validUntil, true
}

// settle applies the outcome of a call begun with beginCall or tryBeginCall,
// which asked the store at start to set the key's expiry to ttl, ends the
// call, and returns the call's error, or the lease's if it ended.
//
// Calls are serialised, so a success sets the validity outright, earlier
// too: it is the expiry applied last. A failure other than "not held" may
// have been applied all the same, so the validity is cut to what that call
// would give if it is shorter; it never grows without a reply.
func (l *Lease) settle(start time.Time, ttl time.Duration, g driver.Grant, err error) error {
	if isNotHeld(err) {
		l.endCall()
		return l.lose(err)
	}
	l.mu.Lock()
	if l.err == nil && err == nil {
		l.validUntil, l.curTTL, l.renewErr = start.Add(g.TTL-drift(ttl)), ttl, nil
		l.armExpiry()
	} else if l.err == nil {
		l.renewErr = err
		if v := start.Add(ttl - drift(ttl)); v.Before(l.validUntil) {
			l.validUntil = v
			l.armExpiry()
		}
	}
	l.endCallLocked()
	l.mu.Unlock()
	if lerr := l.Err(); lerr != nil { // lost meanwhile, or the reply came too late
		return lerr
	}
	return err
}

func (l *Lease) endCall() {
	l.mu.Lock()
	l.endCallLocked()
	l.mu.Unlock()
}

// endCallLocked ends the call under way and wakes an Extend waiting for it.
// Called with l.mu held.
func (l *Lease) endCallLocked() {
	l.calling = false
	if l.callDone != nil {
		close(l.callDone)
		l.callDone = nil
	}
}
