package redlock_test

// Regression tests for what the conformance suite (drivertest) found in the
// Redlock store (issue 14).

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
	"example.com/dlock/redlock"
)

// countingNode counts the calls that reach a node.
type countingNode struct {
	driver.Mutex
	calls atomic.Int64
}

func (n *countingNode) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	n.calls.Add(1)
	return n.Mutex.Acquire(ctx, key, token, ttl)
}

func (n *countingNode) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	n.calls.Add(1)
	return n.Mutex.Extend(ctx, key, token, ttl)
}

func (n *countingNode) Release(ctx context.Context, key, token string) error {
	n.calls.Add(1)
	return n.Mutex.Release(ctx, key, token)
}

// TestDoneContextAsksNoNode: Acquire, Extend, ExtendBatch and Release with
// a context that has already ended return its error and send nothing (an
// Acquire that did reach the nodes left a late cleanup behind).
func TestDoneContextAsksNoNode(t *testing.T) {
	nodes := make([]*countingNode, 3)
	mutexes := make([]driver.Mutex, 3)
	for i := range nodes {
		nodes[i] = &countingNode{Mutex: memstore.New(nil)}
		mutexes[i] = nodes[i]
	}
	s, err := redlock.New(mutexes, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	tok := newToken()
	if _, err := s.Acquire(testCtx(t), "k", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The Acquire returned at the quorum: wait for its last node call, which
	// may start later, so that it is not counted as a call below.
	before := int64(0)
	waitFor(t, 5*time.Second, "the Acquire's node calls", func() bool {
		before = 0
		for _, n := range nodes {
			before += n.calls.Load()
		}
		return before >= int64(len(nodes))
	})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		if _, err := s.Acquire(c.ctx, "other", newToken(), time.Minute); !errors.Is(err, c.want) {
			t.Errorf("Acquire: %v, want %v", err, c.want)
		}
		if _, err := s.Extend(c.ctx, "k", tok, time.Minute); !errors.Is(err, c.want) {
			t.Errorf("Extend: %v, want %v", err, c.want)
		}
		rs := s.ExtendBatch(c.ctx, []driver.ExtendRequest{{Key: "k", Token: tok, TTL: time.Minute}, {Key: "", Token: tok, TTL: time.Minute}})
		if !errors.Is(rs[0].Err, c.want) || !errors.Is(rs[1].Err, driver.ErrInvalid) {
			t.Errorf("ExtendBatch: %v, %v; want %v, then ErrInvalid for the empty key", rs[0].Err, rs[1].Err, c.want)
		}
		if err := s.Release(c.ctx, "k", tok); !errors.Is(err, c.want) {
			t.Errorf("Release: %v, want %v", err, c.want)
		}
	}
	after := int64(0)
	for _, n := range nodes {
		after += n.calls.Load()
	}
	if after != before {
		t.Fatalf("%d node calls with a done context, want none", after-before)
	}
	// Release with a done context changed nothing: the holding is intact.
	if err := s.Release(testCtx(t), "k", tok); err != nil {
		t.Fatalf("Release after the refused ones: %v", err)
	}
}

// TestContendedRemainingFollowsAMajority: a holder whose latest Extend (or
// re-entry) returned once a majority applied it has the new expiry on that
// majority and the old one on the others for a while. A contended Acquire
// must report when a majority can next be free (the new expiry), not the
// old one because the first answers came from the stale nodes. Nodes 0 and
// 1, asked first, keep the old expiry here.
func TestContendedRemainingFollowsAMajority(t *testing.T) {
	const n = 5
	nodes := make([]driver.Mutex, n)
	for i := range nodes {
		nodes[i] = memstore.New(nil)
	}
	s, err := redlock.New(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := testCtx(t)
	tok := newToken()
	// The holder's state, set on the nodes directly: every node holds the
	// key, and nodes 2 to 4, a majority, applied the Extend to 20 s.
	for i, node := range nodes {
		if _, err := node.Acquire(ctx, "k", tok, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			continue
		}
		if _, err := node.Extend(ctx, "k", tok, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for try := range 20 {
		_, err := s.Acquire(ctx, "k", newToken(), time.Minute)
		var ce *driver.ContendedError
		if !errors.As(err, &ce) {
			t.Fatalf("try %d: %v, want *ContendedError", try, err)
		}
		// 20 s less the time since the Extend; 10 s would be the stale one.
		if ce.Remaining < 19*time.Second || ce.Remaining > 20*time.Second {
			t.Fatalf("try %d: Remaining %v, want about 20s (the majority's expiry)", try, ce.Remaining)
		}
	}
}

// gatedNode is a RedisNode whose acquisitions wait for gate and then fail
// without sending anything (a connection that broke before the write: an
// unknown outcome to the Store that did not land). It reports each undo
// (Release or UndoAcquire) after the node answered it. With unguarded set,
// its UndoAcquire is a plain Release: the unguarded late cleanup, for the
// negative control.
type gatedNode struct {
	*redlock.RedisNode
	entered   chan<- struct{}
	gate      <-chan struct{}
	undone    chan<- struct{}
	unguarded bool
	// land makes the acquisition reach the node before it fails: the
	// reply is lost, the hold is there.
	land bool
}

var errNotSent = errors.New("connection reset before the command was sent")

func (g *gatedNode) Acquire(context.Context, string, string, time.Duration) (driver.Grant, error) {
	g.entered <- struct{}{}
	<-g.gate
	return driver.Grant{}, errNotSent
}

func (g *gatedNode) AcquireCall(ctx context.Context, key, token string, ttl time.Duration, call string) (driver.Grant, error) {
	if !g.land {
		return g.Acquire(ctx, key, token, ttl)
	}
	g.entered <- struct{}{}
	<-g.gate
	if _, err := g.RedisNode.AcquireCall(context.Background(), key, token, ttl, call); err != nil {
		return driver.Grant{}, err
	}
	return driver.Grant{}, errors.New("connection reset before the reply")
}

func (g *gatedNode) Release(ctx context.Context, key, token string) error {
	defer func() { g.undone <- struct{}{} }()
	return g.RedisNode.Release(ctx, key, token)
}

func (g *gatedNode) UndoAcquire(ctx context.Context, key, token, call string) (bool, error) {
	if g.unguarded {
		return true, g.Release(ctx, key, token)
	}
	defer func() { g.undone <- struct{}{} }()
	return g.RedisNode.UndoAcquire(ctx, key, token, call)
}

// TestLateUndoSparesTheTokensNextHolding: store A's acquisition is cut off
// (its context ends) while every node's outcome is unknown; it returns, and
// the same token then acquires the key through store B (another process, or
// a Client's retry through another Store). A's late cleanup, once the
// nodes' replies arrive, must not release B's holding. Before the fix it
// released it on every node ("lost before the fence raise" in the suite's
// CancelledContextChangesNothing). The negative control, whose undo is a
// plain Release, must lose B's holding.
func TestLateUndoSparesTheTokensNextHolding(t *testing.T) {
	c := startCluster(t, 3)
	for _, tc := range []struct {
		name      string
		unguarded bool
	}{{"guarded", false}, {"negative control: unguarded undo", true}} {
		t.Run(tc.name, func(t *testing.T) {
			held := lateUndo(t, c, tc.unguarded, false)
			if held != !tc.unguarded {
				t.Fatalf("B's holding intact after A's late cleanup: %v, want %v", held, !tc.unguarded)
			}
		})
	}
}

// TestLateUndoRemovesItsOwnHold: the guard still undoes what the cut-off
// acquisition did create: its holds landed on every node, the replies were
// lost, and nobody acquired since; after the late cleanup the key is free
// (else a lost reply would block every node for the whole TTL).
func TestLateUndoRemovesItsOwnHold(t *testing.T) {
	c := startCluster(t, 3)
	if held := lateUndo(t, c, false, true); held {
		t.Fatal("the key is still held after A's late cleanup of its own holds")
	}
	other := c.independentStore(t, conformanceOpts)
	if _, err := other.Acquire(testCtx(t), "late-undo-free", newToken(), time.Minute); err != nil {
		t.Fatalf("a fresh token cannot acquire after the cleanup: %v", err)
	}
}

// lateUndo runs the scenario (with land, A's acquisitions reach the nodes
// and B does not acquire) and reports whether the key is held on a
// majority afterwards (by the token with one hold; anything else fails).
func lateUndo(t *testing.T, c *cluster, unguarded, land bool) bool {
	entered, undone := make(chan struct{}, 3), make(chan struct{}, 3)
	gate := make(chan struct{})
	nodes := make([]driver.Mutex, len(c.clients))
	for i, cl := range c.clients {
		rn, err := redlock.NewRedisNode(cl, "")
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &gatedNode{RedisNode: rn, entered: entered, gate: gate, undone: undone, unguarded: unguarded, land: land}
	}
	a, err := redlock.New(nodes, conformanceOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	key, tok := "late-undo-"+newToken(), newToken()
	if land {
		key = "late-undo-free"
	}
	actx, cancel := context.WithCancel(testCtx(t))
	go func() {
		for range nodes {
			<-entered
		}
		cancel() // every node call is in flight: A gives up on all of them
	}()
	if _, err := a.Acquire(actx, key, tok, time.Minute); !errors.Is(err, context.Canceled) {
		close(gate)
		t.Fatalf("A's Acquire: %v, want an error matching context.Canceled", err)
	}
	b := c.independentStore(t, conformanceOpts)
	if !land {
		if _, err := b.Acquire(testCtx(t), key, tok, time.Minute); err != nil {
			close(gate)
			t.Fatalf("B's Acquire of the same token: %v", err)
		}
	}
	close(gate) // A's node calls fail now; their late cleanup runs
	deadline := time.After(10 * time.Second)
	for range nodes {
		select {
		case <-undone:
		case <-deadline:
			t.Fatal("A's late cleanup did not reach every node within 10s")
		}
	}
	info, err := b.Inspect(testCtx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Held && (info.Token != tok || info.Holds != 1) {
		t.Fatalf("Inspect = held %v by the token %v with %d holds; want the token's one hold", info.Held, info.Token == tok, info.Holds)
	}
	if info.Held {
		if err := b.Release(testCtx(t), key, tok); err != nil {
			t.Fatalf("B's Release: %v", err)
		}
	}
	return info.Held
}

// TestUndoAcquireTakesOnlyItsOwnHold: UndoAcquire removes a hold only while
// the acquisition it names is the last call that changed the lock, and
// only once.
func TestUndoAcquireTakesOnlyItsOwnHold(t *testing.T) {
	c := startCluster(t, 1)
	n, err := redlock.NewRedisNode(c.clients[0], "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, key, tok := testCtx(t), "undo", newToken()
	holds := func() int {
		info, err := n.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return info.Holds
	}
	undo := func(token, call string, want bool, wantHolds int) {
		t.Helper()
		if ok, err := n.UndoAcquire(ctx, key, token, call); ok != want || err != nil || holds() != wantHolds {
			t.Fatalf("UndoAcquire(%s) = %v, %v, %d holds left; want %v, %d", call, ok, err, holds(), want, wantHolds)
		}
	}
	if _, err := n.AcquireCall(ctx, key, tok, time.Minute, "c1"); err != nil {
		t.Fatal(err)
	}
	undo(newToken(), "c1", false, 1) // another token
	undo(tok, "c0", false, 1)        // another acquisition
	undo(tok, "c1", true, 0)
	undo(tok, "c1", false, 0) // a replay
	if _, err := n.AcquireCall(ctx, key, tok, time.Minute, "c2"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Acquire(ctx, key, tok, time.Minute); err != nil { // a later call of the token
		t.Fatal(err)
	}
	undo(tok, "c2", false, 2)
	if g, err := n.AcquireCall(ctx, key, tok, time.Minute, "c3"); err != nil || g.Holds != 3 {
		t.Fatalf("AcquireCall re-entry = %+v, %v", g, err)
	}
	undo(tok, "c3", true, 2)
	undo(tok, "c3", false, 2)
	if _, err := n.AcquireCall(ctx, key, tok, time.Minute, "bad:id"); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("AcquireCall with ':' in the id: %v, want ErrInvalid", err)
	}
}
