package zkstore_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/overlap"
	"example.com/dlock/internal/testkit"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
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

// testCtx and pollUntil are the shared helpers (internal/testkit).
var (
	testCtx   = testkit.CtxFor
	pollUntil = testkit.WaitFor
)

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

// dialWait connects to addrs and waits (at most 20 s) for a session, as
// Dial does.
func dialWait(addrs []string, timeout time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogger(zkstore.Quiet{}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := zkstore.AwaitSession(ctx, conn, events); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

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
	faulttest.CloseOnCleanup(t, dc)
	return dc
}

// window is one holding as its holder saw it; windows collects them and
// finds the overlaps; faulttest.Hold and faulttest.Contenders record them
// (shared with the other stores' fault tests).
type (
	window  = overlap.Window
	windows = overlap.Recorder
)

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
