package redlock_test

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
	"example.com/dlock/redisstore"
	"example.com/dlock/redlock"
)

// TestWaitersCountsEachProcessOnce: two waiting stores subscribe on a
// majority of nodes or more; the store reports 2 (the maximum), where the
// per-node sum is 4 to 6.
func TestWaitersCountsEachProcessOnce(t *testing.T) {
	ctx := testCtx(t)
	c := startCluster(t, 3)
	s := c.store(t, nil)
	for range 2 {
		_, cancel, err := c.independentStore(t, nil).Subscribe(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
	}
	// Each store keeps its subscriptions on at least a majority of the
	// nodes, so the per-node counts sum to 4 or more: a sum overcounts.
	sum := 0
	for _, cl := range c.clients {
		n, err := cl.PubSubNumSub(ctx, redisstore.DefaultPrefix+"{w}:released").Result()
		if err != nil {
			t.Fatal(err)
		}
		sum += int(n[redisstore.DefaultPrefix+"{w}:released"])
	}
	if sum < 4 {
		t.Fatalf("control: per-node subscriptions sum to %d, want at least 4", sum)
	}
	if n, err := s.Waiters(ctx, "w"); err != nil || n != 2 {
		t.Fatalf("Waiters = %d, %v; want 2 (the per-node sum is %d)", n, err, sum)
	}
	if n, err := s.Waiters(ctx, "other"); err != nil || n != 0 {
		t.Fatalf("Waiters(other) = %d, %v", n, err)
	}
}

// TestListShowsTheMajorityView: a lock held on a majority is listed as
// held; one held by a token on a single node only (a failed acquisition's
// remains) is listed as not held; a released lock as not held with its
// fence; a non-lock key is skipped; with one node down the majority still
// lists, with two down List fails with ErrNoQuorum.
func TestListShowsTheMajorityView(t *testing.T) {
	ctx := testCtx(t)
	c := startCluster(t, 3)
	s := c.store(t, nil)
	cl := newClient(t, s)
	held, err := cl.TryLock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := cl.TryLock(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Release(ctx); err != nil {
		t.Fatal(err)
	}
	one, err := redisstore.New(c.clients[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if _, err := one.Acquire(ctx, "minority", newToken(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.clients[1].Set(ctx, redisstore.DefaultPrefix+"{junk}", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}

	list := func() (map[string]driver.Info, error) {
		got := map[string]driver.Info{}
		err := s.List(ctx, "", func(k string, in driver.Info) bool { got[k] = in; return true })
		return got, err
	}
	got, err := list()
	if err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"gone", "held", "minority"}) {
		t.Fatalf("List: %v", keys)
	}
	if in := got["held"]; !in.Held || in.Fence != held.Fence() || in.Holds != 1 {
		t.Errorf("held: %+v, fence %d", in, held.Fence())
	}
	if in := got["minority"]; in.Held {
		t.Errorf("a key held on one node of three is listed as held: %+v", in)
	}
	if in := got["gone"]; in.Held || in.Fence != gone.Fence() {
		t.Errorf("released: %+v, want not held with the last holding's fence %d", in, gone.Fence())
	}

	c.servers[2].Kill()
	if got, err := list(); err != nil || !got["held"].Held {
		t.Fatalf("one node down: %v, %v", got, err)
	}
	c.servers[1].Kill()
	if _, err := list(); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("two nodes down: want ErrNoQuorum, got %v", err)
	}
}

// plainNode hides every capability of its node but Mutex.
type plainNode struct{ driver.Mutex }

// wrappedNode hides them too, but says what it wraps.
type wrappedNode struct{ driver.Mutex }

func (w wrappedNode) Unwrap() driver.Store { return w.Mutex }

// TestCapabilitiesOfPlainNodesAreUnsupported: over nodes that cannot
// inspect, list or count waiters, those calls say "unsupported" (they used
// to say ErrInvalid); through a wrapper that unwraps, they work.
func TestCapabilitiesOfPlainNodesAreUnsupported(t *testing.T) {
	ctx := testCtx(t)
	nodes := []driver.Mutex{memstore.New(nil), plainNode{memstore.New(nil)}, memstore.New(nil)}
	s, err := redlock.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, inspectErr := s.Inspect(ctx, "k")
	listErr := s.List(ctx, "", func(string, driver.Info) bool { return true })
	_, waitersErr := s.Waiters(ctx, "k")
	for what, err := range map[string]error{"Inspect": inspectErr, "List": listErr} {
		if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s over a plain node: want ErrUnsupported, got %v", what, err)
		}
	}
	if !errors.Is(waitersErr, errors.ErrUnsupported) { // memstore counts no waiters at all
		t.Errorf("Waiters: want ErrUnsupported, got %v", waitersErr)
	}

	plain, err := redlock.New([]driver.Mutex{plainNode{memstore.New(nil)}, plainNode{memstore.New(nil)}, plainNode{memstore.New(nil)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, _, err := plain.Subscribe(ctx, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Subscribe with no notifying node: want ErrUnsupported, got %v", err)
	}

	nodes[1] = wrappedNode{memstore.New(nil)}
	s2, err := redlock.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Inspect(ctx, "k"); err != nil {
		t.Errorf("Inspect through an unwrapping wrapper: %v", err)
	}
	_, cancel, err := s2.Subscribe(ctx, "k")
	if err != nil {
		t.Fatalf("Subscribe through an unwrapping wrapper: %v", err)
	}
	cancel()
}

// TestModelAndCapabilities: validity on the client's clock, and the
// capabilities the package doc lists (and not the ones it says it lacks).
func TestModelAndCapabilities(t *testing.T) {
	s, err := redlock.New([]driver.Mutex{memstore.New(nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m := s.Model(); m.ServerClock || m.Session || m.MinTTL != 10*time.Millisecond || m.Granularity != time.Millisecond {
		t.Errorf("Model = %+v", m)
	}
	var m driver.Mutex = s
	if !has[driver.Notifier](m) || !has[driver.BatchExtender](m) || !has[driver.Inspector](m) ||
		!has[driver.Lister](m) || !has[driver.WaiterCounter](m) || !has[driver.Doctor](m) {
		t.Error("a capability the package doc lists is missing")
	}
	if has[driver.Transferer](m) || has[driver.Atomic](m) || has[driver.Queuer](m) {
		t.Error("a capability the package doc says redlock lacks is present")
	}
}

func has[T any](m driver.Mutex) bool { _, ok := driver.As[T](m); return ok }
