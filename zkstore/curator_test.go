package zkstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/zkstore"
)

// Tests named after Curator's lock bugs, each with the naive behaviour that
// has the bug as its negative control (CURATOR-206 is in loss_test.go).

// jvmLocalReentry is the naive store of CURATOR-604: re-entry is counted in
// the process, as Curator's InterProcessMutex does (thread → count), with
// no look at ZooKeeper.
type jvmLocalReentry struct {
	*zkstore.Store
	grants map[string]driver.Grant
}

func (n jvmLocalReentry) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if g, ok := n.grants[key+"\x00"+token]; ok {
		g.Holds++
		n.grants[key+"\x00"+token] = g
		return g, nil
	}
	g, err := n.Store.Acquire(ctx, key, token, ttl)
	if err == nil {
		n.grants[key+"\x00"+token] = g
	}
	return g, err
}

// TestCURATOR604NoDoubleLockAfterSessionExpiry (CURATOR-604: double lock):
// a holder whose session expired while it was cut off, and whose lock the
// next client took, must not take the lock again when it comes back and
// acquires with the same token: its node is gone with the old session, and
// the store checks ZooKeeper rather than a count in memory. Negative
// control: re-entry counted in the process grants a second holding.
func TestCURATOR604NoDoubleLockAfterSessionExpiry(t *testing.T) {
	for _, naive := range []bool{false, true} {
		name := map[bool]string{false: "store", true: "local-reentry-control"}[naive]
		t.Run(name, func(t *testing.T) {
			e := server(t)
			root := uniq(t)
			h := dialProxied(t, root, lossTimeout, e.Addrs()[0])
			var hs driver.Mutex = h.Store
			if naive {
				hs = jvmLocalReentry{h.Store, map[string]driver.Grant{}}
			}
			other := dial(t, root, lossTimeout, e.Addrs()...)
			ctx := ctxT(t, 30*time.Second)
			token := tok()
			if _, err := hs.Acquire(ctx, "x", token, 0); err != nil {
				t.Fatal(err)
			}
			freed := deleteTime(t, ctx, admin(t), root+"/x")
			h.p.Blackhole(faultproxy.Upstream, true)
			h.p.Blackhole(faultproxy.Downstream, true)
			if (<-freed).IsZero() {
				t.Fatal("the cut-off holder's node was not deleted")
			}
			if _, err := other.Acquire(ctx, "x", tok(), 0); err != nil {
				t.Fatalf("next holder: %v", err)
			}
			h.p.Clear()
			h.p.ResetAll()
			err := definite(t, func(ctx context.Context) error { _, err := hs.Acquire(ctx, "x", token, 0); return err })
			double := err == nil
			if double != naive {
				t.Fatalf("naive=%v: the old holder's Acquire after its session expired: %v (want contended)", naive, err)
			}
			if !naive && !errors.Is(err, driver.ErrNotAcquired) {
				t.Fatalf("the old holder's Acquire: %v, want ErrNotAcquired", err)
			}
		})
	}
}

// dropsStateOnError is the naive store of CURATOR-678: a release whose
// delete failed (connection loss) reports success and forgets the lock,
// while its node stays in ZooKeeper.
type dropsStateOnError struct{ *zkstore.Store }

func (n dropsStateOnError) Release(ctx context.Context, key, token string) error {
	err := n.Store.Release(ctx, key, token)
	if err != nil && !errors.Is(err, driver.ErrNotHeld) {
		return nil
	}
	return err
}

// TestCURATOR678ReleaseAfterConnectionLoss (CURATOR-678: release after a
// connection loss drops local state while the node stays): a Release whose
// delete is lost reports an error (outcome unknown), not success; the node
// is still there when the connection is back, and a retried Release removes
// it, so the next client gets the lock. Negative control: a store that
// reports success when the delete failed leaves a node that no one will
// delete while the session lives.
func TestCURATOR678ReleaseAfterConnectionLoss(t *testing.T) {
	for _, naive := range []bool{false, true} {
		name := map[bool]string{false: "store", true: "drop-state-control"}[naive]
		t.Run(name, func(t *testing.T) {
			e := server(t)
			root := uniq(t)
			h := dialProxied(t, root, lossTimeout, e.Addrs()[0])
			var hs driver.Mutex = h.Store
			if naive {
				hs = dropsStateOnError{h.Store}
			}
			ctx := ctxT(t, 30*time.Second)
			token := tok()
			if _, err := hs.Acquire(ctx, "x", token, 0); err != nil {
				t.Fatal(err)
			}
			h.p.Blackhole(faultproxy.Upstream, true) // the delete is lost
			rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			first := hs.Release(rctx, "x", token)
			cancel()
			h.p.Clear()
			h.p.ResetAll() // reconnect within the session: the node stays
			if errors.Is(first, driver.ErrNotHeld) {
				t.Fatalf("Release during the outage: %v, a definite answer it cannot have", first)
			}
			kids, _, err := admin(t).Children(root + "/x")
			if err != nil {
				t.Fatal(err)
			}
			stuck := first == nil && len(kids) > 0
			if stuck != naive {
				t.Fatalf("naive=%v: Release during the outage returned %v and %d nodes stayed", naive, first, len(kids))
			}
			if naive {
				return
			}
			if err := definite(t, func(ctx context.Context) error { return hs.Release(ctx, "x", token) }); err != nil {
				t.Fatalf("retried Release: %v", err)
			}
			if _, err := dial(t, root, lossTimeout, e.Addrs()...).Acquire(ctx, "x", tok(), 0); err != nil {
				t.Fatalf("next client after the retried release: %v", err)
			}
		})
	}
}

// TestProtectedCreateAdoptsItsNode: the reply to our create is lost with
// the connection after the server made the node; the store finds the node
// by its UUID (Curator's protected mode), adopts it and holds the lock, and
// leaves no second node. Negative control: a store that retries the create
// without looking leaves the first node as an orphan that holds the lock
// (its own queued acquire waits behind it until its context ends).
func TestProtectedCreateAdoptsItsNode(t *testing.T) {
	for _, naive := range []bool{false, true} {
		name := map[bool]string{false: "store", true: "unprotected-control"}[naive]
		t.Run(name, func(t *testing.T) {
			e := server(t)
			root := uniq(t)
			h := dialProxied(t, root, lossTimeout, e.Addrs()[0])
			zkstore.SetUnprotected(h.Store, naive)
			ctx := ctxT(t, 30*time.Second)
			adm := admin(t)
			// The lock path exists (else the create's NoNode would be held
			// too), kept by a child that is not a lock node.
			if err := mkdirs(adm, root+"/x/keep"); err != nil {
				t.Fatal(err)
			}
			resume := h.p.Hold(faultproxy.Downstream)
			type result struct {
				g   driver.Grant
				err error
			}
			done := make(chan result, 1)
			go func() {
				qctx, cancel := context.WithTimeout(ctx, 3*time.Second) // the orphan of the control never goes
				defer cancel()
				g, err := h.AcquireQueued(qctx, "x", tok(), 0) // creates first
				done <- result{g, err}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for {
				kids, _, err := adm.Children(root + "/x")
				if err == nil && len(lockKids(kids)) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the create never reached the server: %v %v", kids, err)
				}
				time.Sleep(5 * time.Millisecond) // polling the server with a deadline
			}
			h.p.ResetAll() // the held reply goes with the connection
			resume()
			r := <-done
			kids, _, err := adm.Children(root + "/x")
			if err != nil {
				t.Fatal(err)
			}
			kids = lockKids(kids)
			ok := r.err == nil && len(kids) == 1
			if ok == naive {
				t.Fatalf("naive=%v: Acquire = %+v, %v; %d nodes under the lock path", naive, r.g, r.err, len(kids))
			}
		})
	}
}

// lockKids returns the lock nodes among kids.
func lockKids(kids []string) []string {
	var out []string
	for _, k := range kids {
		if strings.Contains(k, "-lock-") {
			out = append(out, k)
		}
	}
	return out
}
