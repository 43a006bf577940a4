package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// Extend sets the key's expiry to ttl from now, shorter or longer, and moves
// ValidUntil to match (a shorter ttl as the call is sent, since the store may
// apply it whatever becomes of the reply); renewal then follows ttl. It never shortens another
// live holding of the same owner. It returns ErrLost if the store no longer
// holds the lock; ErrUnavailable if the store was unreachable or ctx ended
// (validity kept, cut to ttl if shorter); ErrInvalid for a bad ttl or a nil
// ctx, and Err's error on a released or lost lease, both without I/O. More:
// docs/api.md#leaseextend.
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
	// A shorter ttl may be applied as soon as it is sent: the validity
	// follows it now, not when (or if) the reply comes.
	l.v.Shorten(l.holder(), lease.ValidUntil(start, ttl, ttl))
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
