package zkstore_test

import (
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
)

// TestUncontendedSectionRequests pins the requests of a critical section on
// a free key: AcquireQueued (a Client's Lock) is a create and a listing,
// Release a delete: 3, as go-zookeeper's own Lock; Acquire (TryLock) lists
// first: 4. The grant's fence is the node's czxid (nothing changed the lock
// path's children after the create), as when the store read it. Control:
// the same store made to stat its node after the create (the request it no
// longer sends) counts one more per section, with the same fence.
func TestUncontendedSectionRequests(t *testing.T) {
	e := server(t)
	const rounds = 5
	for _, tc := range []struct {
		name          string
		stat          bool
		queued, tryAt int64 // requests per section
	}{
		{"no-stat", false, 3, 4},
		{"control-stat", true, 4, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := uniq(t)
			s := dial(t, root, 10*time.Second, e.Addrs()...)
			zkstore.SetStatCreate(s, tc.stat)
			ctx := ctxT(t, 20*time.Second)
			section := func(acquire func(key, token string) (driver.Grant, error)) {
				t.Helper()
				tk := tok()
				g, err := acquire("k", tk)
				if err != nil {
					t.Fatal(err)
				}
				kids, _, err := admin(t).Children(root + "/k")
				if err != nil || len(kids) != 1 {
					t.Fatalf("children %v, %v; want our node", kids, err)
				}
				_, st, err := admin(t).Get(root + "/k/" + kids[0])
				if err != nil || g.Fence != uint64(st.Czxid) || st.EphemeralOwner != s.Conn().SessionID() {
					t.Fatalf("grant fence %d, node %+v, %v; want the fence the node's czxid, the node ours", g.Fence, st, err)
				}
				if err := s.Release(ctx, "k", tk); err != nil {
					t.Fatal(err)
				}
			}
			queued := func(k, tk string) (driver.Grant, error) { return s.AcquireQueued(ctx, k, tk, 0) }
			try := func(k, tk string) (driver.Grant, error) { return s.Acquire(ctx, k, tk, 0) }
			section(queued) // creates the lock path
			for _, m := range []struct {
				name    string
				acquire func(key, token string) (driver.Grant, error)
				want    int64
			}{{"AcquireQueued", queued, tc.queued}, {"Acquire", try, tc.tryAt}} {
				before := zkstore.Requests(s)
				for range rounds {
					section(m.acquire)
				}
				if n := zkstore.Requests(s) - before; n != m.want*rounds {
					t.Fatalf("%s + Release on a free key: %d requests in %d sections; want %d each", m.name, n, rounds, m.want)
				}
			}
		})
	}
}

// TestGrantFenceIsTheListingsPzxid: a waiter granted after its
// predecessor's deletion gets the lock path's pzxid as its fence (above its
// node's czxid, which the store does not read), and its own Inspect reports
// it. Another Store's Inspect reports the node's czxid, as documented (the
// pzxid is not in the node). Control: a waiter that stats its node gets the
// same fence.
func TestGrantFenceIsTheListingsPzxid(t *testing.T) {
	e := server(t)
	for _, stat := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-stat", true: "control-stat"}[stat], func(t *testing.T) {
			root := uniq(t)
			h := dial(t, root, 10*time.Second, e.Addrs()...)
			w := dial(t, root, 10*time.Second, e.Addrs()...)
			zkstore.SetStatCreate(w, stat)
			ctx := ctxT(t, 20*time.Second)
			ht := tok()
			g1, err := h.Acquire(ctx, "k", ht, 0)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				g   driver.Grant
				err error
			}
			got := make(chan result, 1)
			go func() { g, err := w.AcquireQueued(ctx, "k", tok(), 0); got <- result{g, err} }()
			waitWaiters(t, w, "k", 1)
			if err := h.Release(ctx, "k", ht); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil {
				t.Fatalf("waiter: %v", r.err)
			}
			kids, _, err := admin(t).Children(root + "/k")
			if err != nil || len(kids) != 1 {
				t.Fatalf("children %v, %v; want the waiter's node", kids, err)
			}
			_, node, err := admin(t).Get(root + "/k/" + kids[0])
			if err != nil {
				t.Fatal(err)
			}
			_, dir, err := admin(t).Exists(root + "/k")
			if err != nil || dir == nil {
				t.Fatalf("lock path: %v", err)
			}
			if r.g.Fence <= g1.Fence || r.g.Fence <= uint64(node.Czxid) || r.g.Fence != uint64(dir.Pzxid) {
				t.Fatalf("waiter's fence %d; want the lock path's pzxid %d, above the holder's %d and the node's czxid %d",
					r.g.Fence, dir.Pzxid, g1.Fence, node.Czxid)
			}
			if info, err := w.Inspect(ctx, "k"); err != nil || info.Fence != r.g.Fence {
				t.Fatalf("the holder's own Inspect = %+v, %v; want fence %d", info, err, r.g.Fence)
			}
			if info, err := h.Inspect(ctx, "k"); err != nil || info.Fence != uint64(node.Czxid) {
				t.Fatalf("another Store's Inspect = %+v, %v; want the node's czxid %d (documented)", info, err, node.Czxid)
			}
		})
	}
}

// TestWaiterNotWokenByTransfers: a waiter queued behind a holder that hands
// the lock on locally (Transfer, a setData of the holder's node) five times
// is not woken by those writes: it sends its create, listing and watch,
// then nothing until the release, then one listing. Control: a waiter
// watching its predecessor with exists (the store's former watch) is woken
// by the transfers and lists again.
func TestWaiterNotWokenByTransfers(t *testing.T) {
	e := server(t)
	for _, existsWatch := range []bool{false, true} {
		t.Run(map[bool]string{false: "children-watch", true: "control-exists-watch"}[existsWatch], func(t *testing.T) {
			root := uniq(t)
			h := dial(t, root, 10*time.Second, e.Addrs()...)
			w := dial(t, root, 10*time.Second, e.Addrs()...)
			zkstore.SetExistsWatch(w, existsWatch)
			ctx := ctxT(t, 20*time.Second)
			from := tok()
			if _, err := h.Acquire(ctx, "k", from, 0); err != nil {
				t.Fatal(err)
			}
			before := zkstore.Requests(w)
			got := make(chan error, 1)
			go func() { _, err := w.AcquireQueued(ctx, "k", tok(), 0); got <- err }()
			waitRequests(t, w, before+3, 10*time.Second) // create, list, watch sent
			// A read on the waiter's conn: the server answers a session's
			// requests in order, so its watch is set once this returns.
			if _, err := w.Waiters(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				to := tok()
				if _, err := h.Transfer(ctx, "k", from, to, 0); err != nil {
					t.Fatal(err)
				}
				from = to
			}
			// ZooKeeper sends a watch event before the reply to any later
			// read of that client: once this returns, every event the
			// transfers fired has reached the waiter's conn.
			if _, err := w.Waiters(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			quiet := before + 5 // the waiter's 3 and the 2 reads above
			if existsWatch {
				waitRequests(t, w, quiet+1, 10*time.Second) // woken: lists again
			} else {
				// Absence cannot be awaited: observe the waiter for a while.
				deadline := time.Now().Add(300 * time.Millisecond)
				for time.Now().Before(deadline) {
					if n := zkstore.Requests(w); n != quiet {
						t.Fatalf("the waiter sent %d requests after the transfers; want none", n-quiet)
					}
					time.Sleep(10 * time.Millisecond) // polling a counter, bounded
				}
			}
			if err := h.Release(ctx, "k", from); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter: %v", err)
			}
			n := zkstore.Requests(w) - quiet
			if !existsWatch && n != 1 {
				t.Fatalf("the waiter sent %d requests after the release; want 1 (the listing)", n)
			}
			if existsWatch && n < 2 {
				t.Fatalf("control: the exists-watching waiter sent %d requests after the transfers; want a listing and a new watch at least", n)
			}
		})
	}
}

// waitRequests polls until s has sent at least n requests.
func waitRequests(t *testing.T, s *zkstore.Store, n int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for zkstore.Requests(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the store sent %d requests within %v; want %d", zkstore.Requests(s), d, n)
		}
		time.Sleep(5 * time.Millisecond) // polling a counter, with a deadline
	}
}
