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
// Holdings of one owner on one key (re-entries, nested Do) share one record
// in the store, and no holding shortens another: the store is asked for the
// longer of ttl and the lease every other live holding of the owner set
// last, while this lease's validity follows ttl; such calls run one at a
// time for the owner and key.
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
	rec, err := l.beginCall(ctx)
	if err != nil {
		return err
	}
	if rec != nil {
		defer l.c.records.end(rec)
	}
	start := l.v.Now()
	ask := l.ask(ttl)
	g, err := l.c.store.Extend(ctx, l.key, l.token, ask)
	if err = l.settle(start, ttl, ask, g, classify(err)); err == nil {
		l.c.renewer.Retune(l.renewable(), ttl)
	}
	return err
}

// beginCall marks a call that sets the key's expiry, waiting as long as
// ctx allows for one under way: on the lease, and on its record if it
// shares one (record.go), whose calls run one at a time. It returns the
// record, to end its call with.
func (l *Lease) beginCall(ctx context.Context) (*record, error) {
	for {
		rec := l.rec.Load()
		if rec != nil {
			if err := l.c.records.begin(ctx, rec); err != nil {
				return nil, fmt.Errorf("%w: lock %q: %w: %w", ErrUnavailable, l.key, lease.ErrCallWait, err)
			}
		}
		err := l.v.BeginCall(ctx)
		if err == nil && l.rec.Load() != rec {
			l.v.EndCall() // the lease joined a record meanwhile: take its turn
			err = errAdopted
		}
		if err != nil && rec != nil {
			l.c.records.end(rec)
		}
		switch {
		case err == nil:
			return rec, nil
		case err == errAdopted:
			continue
		case errors.Is(err, lease.ErrCallWait):
			return nil, fmt.Errorf("%w: lock %q: %w", ErrUnavailable, l.key, err)
		}
		return nil, err
	}
}

// errAdopted says that a lease joined a record while a call waited.
var errAdopted = errors.New("lease joined a record")

// ask returns the TTL to ask the store for when this lease sets the key's
// expiry to ttl: ttl, or longer if another live holding of the same Owner
// set a longer one (record.go), so that no holding shortens another's.
// Called with a call on the record under way.
func (l *Lease) ask(ttl time.Duration) time.Duration {
	rec := l.rec.Load()
	if rec == nil {
		return ttl
	}
	return max(ttl, l.c.records.floor(rec, l))
}

// tryBeginCall marks a call under way, unless one is already or the lease
// ended; it reports whether it did, and the TTL and validity to renew with.
func (l *Lease) tryBeginCall() (ttl time.Duration, validUntil time.Time, ok bool) {
	return l.v.TryBeginCall()
}

// settle applies the outcome of a call begun with beginCall or tryBeginCall
// (see lease.Validity.Settle), which set the key's expiry to ttl for this
// lease by asking the store for ask (see Lease.ask), and returns the call's
// error, or the lease's if it ended. The lease's validity follows ttl: what
// the store granted beyond it is other holdings'.
func (l *Lease) settle(start time.Time, ttl, ask time.Duration, g driver.Grant, err error) error {
	grant := g.TTL - (ask - ttl)
	err = l.v.Settle(l.holder(), start, ttl, grant, err)
	if rec := l.rec.Load(); rec != nil && err == nil {
		l.c.records.set(rec, l, ttl)
	}
	return err
}
