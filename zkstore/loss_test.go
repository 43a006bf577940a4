package zkstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// suspendedIsHeld is the naive store of CURATOR-206: a lost connection is
// not a lost lock. While the server cannot be reached, Extend answers from
// memory with the last grant, so the lease stays valid through the
// session's expiry.
type suspendedIsHeld struct {
	*zkstore.Store
	last map[string]driver.Grant
}

func (n suspendedIsHeld) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.Store.Acquire(ctx, key, token, ttl)
	if err == nil {
		n.last[key] = g
	}
	return g, err
}

func (n suspendedIsHeld) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.Store.AcquireQueued(ctx, key, token, ttl)
	if err == nil {
		n.last[key] = g
	}
	return g, err
}

func (n suspendedIsHeld) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.Store.Extend(ctx, key, token, ttl)
	if err == nil {
		n.last[key] = g
		return g, nil
	}
	if errors.Is(err, driver.ErrNotHeld) {
		return g, err
	}
	return n.last[key], nil // "suspended": assume still held
}

func (n suspendedIsHeld) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return faulttest.ExtendEach(ctx, n.Extend, reqs)
}

// TestLostSignalBeforeHandover: the holder's connection is cut (both
// directions blackholed) for longer than its session timeout. The dlock
// Lease on this store reports its loss before the server deletes the lock
// node (seen by a watch from another connection) and before a second store,
// queued behind it, gets the lock. Negative control: a store that
// overclaims its session by one timeout (faulttest.Overclaim, as a store
// counting from the reply, or from the last heartbeat the client library
// saw, or from nothing, would) reports the loss after the handover.
func TestLostSignalBeforeHandover(t *testing.T) {
	for _, broken := range []bool{false, true} {
		name := map[bool]string{false: "store", true: "overclaiming-control"}[broken]
		t.Run(name, func(t *testing.T) {
			wrap := func(s *zkstore.Store) driver.Mutex { return s }
			if broken {
				wrap = func(s *zkstore.Store) driver.Mutex { return faulttest.Overclaim{Store: s, More: s.SessionTimeout()} }
			}
			r := lossRun(t, wrap, broken)
			ok := r.lost.Before(r.freed) && r.lost.Before(r.taken)
			t.Logf("from the cut: lease lost after %v, node deleted after %v, next holder after %v (session timeout %v)",
				r.lost.Sub(r.cut), r.freed.Sub(r.cut), r.taken.Sub(r.cut), lossTimeout)
			if ok == broken {
				t.Fatalf("broken=%v: lease lost %v, node deleted %v, next holder %v (from the cut)", broken,
					r.lost.Sub(r.cut), r.freed.Sub(r.cut), r.taken.Sub(r.cut))
			}
		})
	}
}

// TestCURATOR206NoTwoHoldersAfterExpiry (CURATOR-206: two holders after a
// session expiry): a holder cut off past its session timeout stops
// believing it holds the lock before the next holder gets it, and once its
// connection is back its store says the holding is gone. Negative control:
// a store that treats a lost connection as "still held" (Curator's
// SUSPENDED without LOST handling) still believes it holds when the next
// holder gets the lock.
func TestCURATOR206NoTwoHoldersAfterExpiry(t *testing.T) {
	for _, naive := range []bool{false, true} {
		name := map[bool]string{false: "store", true: "suspended-is-held-control"}[naive]
		t.Run(name, func(t *testing.T) {
			wrap := func(s *zkstore.Store) driver.Mutex { return s }
			if naive {
				wrap = func(s *zkstore.Store) driver.Mutex { return suspendedIsHeld{s, map[string]driver.Grant{}} }
			}
			r := lossRun(t, wrap, false)
			twoHolders := r.lost.IsZero() || !r.lost.Before(r.taken)
			if twoHolders != naive {
				t.Fatalf("naive=%v: lease lost at %v, next holder at %v (from the cut): two holders %v", naive,
					r.lost.Sub(r.cut), r.taken.Sub(r.cut), twoHolders)
			}
			if naive {
				return
			}
			// Once the connection is back the old session is gone, so is the
			// holding: the first definite answer says so.
			err := definite(t, func(ctx context.Context) error {
				_, err := r.store.Extend(ctx, "x", r.token, 0)
				return err
			})
			if !errors.Is(err, driver.ErrNotHeld) {
				t.Fatalf("Extend by the expired holder after reconnection: %v, want ErrNotHeld", err)
			}
		})
	}
}

// lossTimeout is the holder's session timeout in the loss tests.
const lossTimeout = 3 * time.Second

// lossResult is what lossRun measured.
type lossResult struct {
	cut, lost, freed, taken time.Time
	store                   *zkstore.Store
	token                   string
}

// lossRun locks "x" with a dlock Client on wrap(holder store), queues a
// second store behind it, cuts the holder's connection for longer than
// its session timeout and records when the lease reported its loss (zero
// if it did not within twice the timeout after the handover), when the
// server deleted the node and when the second store got the lock. The cut
// is healed before it returns. overAsk makes the client ask for twice the
// timeout (for the overclaiming control).
func lossRun(t *testing.T, wrap func(*zkstore.Store) driver.Mutex, overAsk bool) lossResult {
	e := server(t)
	root := uniq(t)
	h := dialProxied(t, root, lossTimeout, e.Addrs()[0])
	other := dial(t, root, lossTimeout, e.Addrs()...)
	adm := admin(t)
	ctx := ctxT(t, 40*time.Second)
	lease := lossTimeout
	if overAsk {
		lease = 2 * lossTimeout
	}
	dc, err := dlock.New(wrap(h.Store), dlock.WithAutoRenew(lease))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	l, err := dc.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan time.Time, 1)
	freed := deleteTime(t, ctx, adm, root+"/x")
	taken := make(chan time.Time, 1)
	go func() {
		// Retried on errors of unknown outcome (a connection dropped on a
		// loaded machine): the second store waits for the lock, however long.
		for {
			_, err := other.AcquireQueued(ctx, "x", tok(), 0)
			if err == nil {
				taken <- time.Now()
				return
			}
			if ctx.Err() != nil || errors.Is(err, driver.ErrNotAcquired) || errors.Is(err, driver.ErrInvalid) {
				t.Errorf("second store: %v", err)
				taken <- time.Time{}
				return
			}
			t.Logf("second store, retrying: %v", err)
		}
	}()
	waitWaiters(t, other, "x", 1)
	r := lossResult{cut: time.Now(), store: h.Store, token: l.Token()}
	h.p.Blackhole(faultproxy.Upstream, true)
	h.p.Blackhole(faultproxy.Downstream, true)
	go func() {
		select {
		case <-l.Done():
			lost <- time.Now()
		case <-time.After(2 * lossTimeout): // the fault's bound: a lease that never reports
			lost <- time.Time{}
		}
	}()
	r.freed, r.taken, r.lost = <-freed, <-taken, <-lost
	h.p.Clear()
	h.p.ResetAll()
	if !r.lost.IsZero() {
		if err := l.Err(); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("lease error %v, want ErrLost", err)
		}
	}
	return r
}

// deleteTime reports when the holder node under lp (the first lock node
// now) is deleted, watched from conn.
func deleteTime(t *testing.T, ctx context.Context, conn *zk.Conn, lp string) <-chan time.Time {
	t.Helper()
	kids, _, err := conn.Children(lp)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of %s: %v, %v; want the holder's node", lp, kids, err)
	}
	ok, _, ch, err := conn.ExistsW(lp + "/" + kids[0])
	if err != nil || !ok {
		t.Fatalf("watch %s: %v %v", kids[0], ok, err)
	}
	out := make(chan time.Time, 1)
	go func() {
		select {
		case ev := <-ch:
			if ev.Type == zk.EventNodeDeleted {
				out <- time.Now()
				return
			}
		case <-ctx.Done():
		}
		out <- time.Time{}
	}()
	return out
}

// waitWaiters polls until key has n waiters.
func waitWaiters(t *testing.T, s *zkstore.Store, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.Waiters(ctxT(t, 5*time.Second), key)
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Waiters(%q) = %d, %v; want %d", key, got, err, n)
		}
		time.Sleep(10 * time.Millisecond) // polling the server with a deadline
	}
}

// definite calls f until it returns nil or an error matching a sentinel of
// package driver (a definite answer), for at most 15 s, and returns that
// answer (or the last error).
func definite(t *testing.T, f func(context.Context) error) error {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrNotAcquired) ||
			errors.Is(err, driver.ErrInvalid) || errors.Is(err, driver.ErrRefused) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond) // waiting for the reconnection, with a deadline
	}
}
