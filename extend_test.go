package dlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// gateStore holds every Extend asking for ttl gated until gate is closed,
// and tells entered when the first one arrives. It has no Unwrap: the
// wrapped store's BatchExtender would renew around the gate.
type gateStore struct {
	driver.Mutex
	gated   time.Duration
	entered chan struct{}
	gate    chan struct{}
}

func (g *gateStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if ttl == g.gated {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		select {
		case <-g.gate:
		case <-ctx.Done():
			return driver.Grant{}, ctx.Err()
		}
	}
	return g.Mutex.Extend(ctx, key, token, ttl)
}

// Extend and renewal are serialised. A renewal under way when Extend is
// called finishes first, so it cannot overwrite the Extend's validity with
// its own; an Extend whose context ends while it waits changes nothing.
// (Was TestS1ExtendWaitsForRenewalUnderWay, review item S1.)
func TestExtendWaitsForRenewalUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The renewal (at a third of the lease) may hang for half a period, 500 ms.
		const lease, longer = 3 * time.Second, 5 * time.Second
		gs := &gateStore{Mutex: memstore.New(nil), gated: lease, entered: make(chan struct{}, 1), gate: make(chan struct{})}
		c, err := dlock.New(gs)
		if err != nil {
			t.Fatal(err)
		}
		l := mustLock(t, c, testCtx(t), "k", dlock.WithAutoRenew(lease))
		defer func() { _ = l.Release(context.Background()) }()
		within(t, gs.entered, 2*time.Second, "a renewal")
		// Waiting for the renewal under way is bounded by the caller's context.
		short, cancel := context.WithTimeout(testCtx(t), 20*time.Millisecond)
		defer cancel()
		before := l.ValidUntil()
		if err := l.Extend(short, longer); !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Extend whose context ended while a renewal was under way = %v", err)
		}
		if l.ValidUntil() != before || l.Err() != nil {
			t.Fatalf("an Extend that never reached the store changed the lease (Err %v)", l.Err())
		}
		res := make(chan error, 1)
		go func() { res <- l.Extend(testCtx(t), longer) }()
		synctest.Wait() // Extend is blocked, or has returned
		select {
		case err := <-res:
			t.Fatalf("Extend returned (%v) while a renewal of the lease was under way", err)
		default:
		}
		extStart := time.Now()
		close(gs.gate) // the renewal settles first, then Extend is sent
		if err := <-res; err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if got := l.ValidUntil().Sub(extStart); got != longer-longer/100-2*time.Millisecond { // the drift allowance; no time passes in the bubble
			t.Fatalf("after Extend(%v) the lease is valid for %v: the renewal overwrote it", longer, got)
		}
	})
}
