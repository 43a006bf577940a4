package zkstore_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/overlap"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// The fault tests (fault_test.go) and the Curator interoperability test
// (curator_test.go) start their own servers with internal/zkserver: a
// standalone server, or a 3-server ensemble, with 3 s sessions. Their
// overlap detector records, for every holding, the window in which its
// holder acted as the holder: from the return of Lock to the moment it
// stopped (its work done, or its lease's Done seen). Two windows that
// intersect are two holders at once. The windows are taken on this
// process's monotonic clock, so every holder whose windows are compared
// runs in the test process.

// faultTimeout is the session timeout of the fault tests.
const faultTimeout = 3 * time.Second

// testPath returns a root path no other test uses.
func testPath(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return "/" + name + "-" + hex.EncodeToString(b)
}

// testCtx returns a context ending after d or at the test's end.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// pollUntil polls cond every 20 ms until it holds, failing the test after d.
func pollUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// dialRaw returns a go-zookeeper connection to addrs with the given session
// timeout, connected (or the test fails), closed at the test's end.
func dialRaw(t testing.TB, addrs []string, timeout time.Duration) *zk.Conn {
	t.Helper()
	conn, err := dialWait(addrs, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// dialWait connects to addrs and waits (at most 20 s) for a session.
func dialWait(addrs []string, timeout time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogger(silentLogger{}))
	if err != nil {
		return nil, err
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-deadline:
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session with %v in 20 s", addrs)
		}
	}
}

// silentLogger drops go-zookeeper's log lines (reconnection chatter).
type silentLogger struct{}

func (silentLogger) Printf(string, ...any) {}

// makeParents creates path and its missing parents as persistent nodes.
func makeParents(t testing.TB, conn *zk.Conn, path string) {
	t.Helper()
	p := ""
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		p += "/" + part
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

// newFaultStore returns a Store dialled to addrs (its own connection and
// session), with root and the session timeout, closed at the test's end,
// and its connection.
func newFaultStore(t testing.TB, addrs []string, root string, timeout time.Duration) (*zkstore.Store, *zk.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zkstore.Dial(ctx, addrs, zkstore.Options{Root: root, SessionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, s.Conn()
}

// newFaultClient returns a dlock Client on m, renewed every session timeout.
func newFaultClient(t testing.TB, m driver.Mutex, timeout time.Duration) *dlock.Client {
	t.Helper()
	dc, err := dlock.New(m, dlock.WithAutoRenew(timeout))
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// window is one holding as its holder saw it; windows collects them and
// finds the overlaps (shared with the other stores' fault tests).
type (
	window  = overlap.Window
	windows = overlap.Recorder
)

// holdFrom acts as the holder of l, acquired at from, for d: until d has
// passed or, if heed, until l reports its loss. It records the window and
// releases l (a lost lease's release may fail: nothing to undo).
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
	_ = l.Release(ctx)
	rec.Add(x)
	return x
}

// contend runs a worker on c that locks key (waiting at most wait), holds
// it 5–30 ms, and releases it, until stop closes.
func contend(c *dlock.Client, who, key string, wait time.Duration, seed uint64, stop <-chan struct{}, rec *windows) {
	rng := rand.New(rand.NewPCG(seed, 15))
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
		holdFrom(l, time.Now(), who, time.Duration(5+rng.IntN(25))*time.Millisecond, true, rec)
		cancel()
	}
}

// seedFor returns a seed for a test's randomness, logged so that a failure
// can be told apart (the interleaving still varies).
func seedFor(t *testing.T) uint64 {
	s := rand.Uint64()
	t.Logf("seed %d", s)
	return s
}

// fencedWrite is the fenced resource of the fault tests: a znode holding
// "<fence> <value>" that refuses a write with a fence lower than the one it
// holds (read, compare, then a conditional set on the version read; retried
// when another write came in between). It reports whether the write landed.
// unfenced skips the comparison (the bug fencing prevents). Each read
// follows a sync: a follower may serve reads that lag the leader.
func fencedWrite(conn *zk.Conn, path string, fence uint64, value string, unfenced bool) (bool, error) {
	for range 20 {
		if _, err := conn.Sync(path); err != nil {
			return false, err
		}
		b, st, err := conn.Get(path)
		if err != nil {
			return false, err
		}
		stored, _, _ := strings.Cut(string(b), " ")
		if f, err := strconv.ParseUint(stored, 10, 64); err == nil && f > fence && !unfenced {
			return false, nil
		}
		_, err = conn.Set(path, []byte(strconv.FormatUint(fence, 10)+" "+value), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		return err == nil, err
	}
	return false, errors.New("fencedWrite: 20 conflicting writes")
}

// retryWrite is fencedWrite retried for up to 20 s while the connection
// recovers (a holder whose session expired reconnects with a new one).
func retryWrite(conn *zk.Conn, path string, fence uint64, value string, unfenced bool) (bool, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := fencedWrite(conn, path, fence, value, unfenced)
		err = zkstore.ConnLoss(err) // a write on the socket the server closed while we were stopped
		if err == nil || time.Now().After(deadline) ||
			!(errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrNoServer)) {
			return ok, err
		}
		time.Sleep(50 * time.Millisecond) // the connection reconnects on its own; bounded by the deadline
	}
}

// resourceValue reads the fenced resource's value (without its fence),
// after a sync (the conn's server may be a follower that lags the leader).
func resourceValue(t testing.TB, conn *zk.Conn, path string) string {
	t.Helper()
	if _, err := conn.Sync(path); err != nil {
		t.Fatal(err)
	}
	b, _, err := conn.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	_, v, _ := strings.Cut(string(b), " ")
	return v
}

// noOwnerCheck is the broken lock of the negative controls: Acquire grants
// a held key too, and Extend and Release of a key another owner holds
// report success. It hides the store's capabilities (no Unwrap).
type noOwnerCheck struct{ s *zkstore.Store }

func (n noOwnerCheck) Model() driver.Model { return n.s.Model() }

func (n noOwnerCheck) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.s.Acquire(ctx, key, token, ttl)
	if errors.Is(err, driver.ErrNotAcquired) {
		return driver.Grant{Fence: 1, Holds: 1, TTL: n.s.Model().SessionTTL / 2}, nil
	}
	return g, err
}

func (n noOwnerCheck) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.s.Extend(ctx, key, token, ttl)
	if errors.Is(err, driver.ErrNotHeld) {
		return driver.Grant{Fence: 1, Holds: 1, TTL: n.s.Model().SessionTTL / 2}, nil
	}
	return g, err
}

func (n noOwnerCheck) Release(ctx context.Context, key, token string) error {
	if err := n.s.Release(ctx, key, token); !errors.Is(err, driver.ErrNotHeld) {
		return err
	}
	return nil
}

// overclaimer is a broken store for a negative control: it reports its
// session certain for one session timeout longer than the store does (as a
// store counting from a late reply, or from nothing, would). Its Model
// claims twice the timeout too, or the Client would cap every lease at the
// real one (and hide the overclaim). Every other capability is the store's.
type overclaimer struct{ *zkstore.Store }

func (o overclaimer) Model() driver.Model {
	m := o.Store.Model()
	m.SessionTTL *= 2
	return m
}

func (o overclaimer) more() time.Duration { return o.Store.Model().SessionTTL }

func (o overclaimer) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := o.Store.Acquire(ctx, key, token, ttl)
	g.TTL += o.more()
	return g, err
}

func (o overclaimer) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := o.Store.AcquireQueued(ctx, key, token, ttl)
	g.TTL += o.more()
	return g, err
}

func (o overclaimer) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := o.Store.Extend(ctx, key, token, ttl)
	g.TTL += o.more()
	return g, err
}

func (o overclaimer) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	rs := o.Store.ExtendBatch(ctx, reqs)
	for i := range rs {
		rs[i].Grant.TTL += o.more()
	}
	return rs
}
