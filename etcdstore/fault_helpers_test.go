package etcdstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"example.com/dlock/internal/overlap"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
)

// The fault tests (fault_test.go, quorum_test.go, child_test.go) run on
// their own 3-member clusters, with 3 s sessions. Their overlap detector
// records, for every holding, the window in which its holder acted as the
// holder: from the return of Lock to the moment it stopped (its work done,
// or its lease's Done seen). Two windows that intersect are two holders at
// once. The windows are taken on this process's monotonic clock, so every
// holder whose windows are compared runs in the test process.

// faultTTL is the session TTL of the fault tests.
const faultTTL = 3 * time.Second

// window is one holding as its holder saw it; windows collects them and
// finds the overlaps (shared with the other stores' fault tests).
type (
	window  = overlap.Window
	windows = overlap.Recorder
)

// hold acts as the holder of l for d: until d has passed or, if heed, until
// l reports its loss. It records the window (from the call) and releases l.
func hold(l *dlock.Lease, who string, d time.Duration, heed bool, rec *windows) window {
	return holdFrom(l, time.Now(), who, d, heed, rec)
}

// holdFrom is hold for a lease acquired at from.
func holdFrom(l *dlock.Lease, from time.Time, who string, d time.Duration, heed bool, rec *windows) window {
	x := window{Who: who, From: from, Fence: l.Fence()}
	work := time.NewTimer(d) // the critical section's work
	defer work.Stop()
	if heed {
		select {
		case <-work.C:
		case <-l.Done():
			x.Lost = true
		}
	} else {
		<-work.C
	}
	x.To = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	x.RelErr = l.Release(ctx) // a lost lease's release may fail: nothing to undo
	x.Release = time.Since(x.To)
	rec.Add(x)
	return x
}

// contend runs a worker on c that locks key (waiting at most wait), holds
// it 5–30 ms, and releases it, until stop closes. It returns when the
// worker has stopped.
func contend(c *dlock.Client, who, key string, wait time.Duration, seed uint64, stop <-chan struct{}, rec *windows) {
	rng := rand.New(rand.NewPCG(seed, 14))
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		l, err := c.Lock(ctx, key, dlock.WithWait(wait))
		if err != nil {
			cancel()
			rec.Fail(err)
			continue
		}
		hold(l, who, time.Duration(5+rng.IntN(25))*time.Millisecond, true, rec)
		cancel()
	}
}

// noOwnerCheck is the broken lock of the negative controls: Acquire grants
// a held key too, and Extend and Release of a key another owner holds
// report success. It hides the store's capabilities (no Unwrap).
type noOwnerCheck struct{ s *etcdstore.Store }

func (n noOwnerCheck) Model() driver.Model { return n.s.Model() }

func (n noOwnerCheck) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.s.Acquire(ctx, key, token, ttl)
	if errors.Is(err, driver.ErrNotAcquired) {
		return driver.Grant{Fence: 1, Holds: 1, TTL: n.s.SessionTTL() / 2}, nil
	}
	return g, err
}

func (n noOwnerCheck) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.s.Extend(ctx, key, token, ttl)
	if errors.Is(err, driver.ErrNotHeld) {
		return driver.Grant{Fence: 1, Holds: 1, TTL: n.s.SessionTTL() / 2}, nil
	}
	return g, err
}

func (n noOwnerCheck) Release(ctx context.Context, key, token string) error {
	if err := n.s.Release(ctx, key, token); !errors.Is(err, driver.ErrNotHeld) {
		return err
	}
	return nil
}

// seedFor returns a seed for a test's randomness, logged so that a failure
// can be told apart (the interleaving still varies).
func seedFor(t *testing.T) uint64 {
	s := rand.Uint64()
	t.Logf("seed %d", s)
	return s
}
