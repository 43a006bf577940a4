package zkstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
)

// TestCloseDoc pins Close's doc comment for a store made with New: later
// calls fail with ErrInvalid (every I/O method), the conn stays open and
// the store's lock node stays until the session ends. The control is the
// same Acquire before Close, which succeeds.
func TestCloseDoc(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	conn, _, err := zk.Connect(server(t).Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	root := uniq(t)
	s, err := zkstore.New(conn, zkstore.Options{Root: root, SessionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := tok()
	if _, err := s.Acquire(ctx, "k", a, time.Second); err != nil { // control
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, acq := s.Acquire(ctx, "k2", tok(), time.Second)
	_, que := s.AcquireQueued(ctx, "k2", tok(), time.Second)
	_, ext := s.Extend(ctx, "k", a, time.Second)
	_, tra := s.Transfer(ctx, "k", a, tok(), time.Second)
	_, ins := s.Inspect(ctx, "k")
	_, wai := s.Waiters(ctx, "k")
	kee := s.KeepAlive(ctx)
	for name, err := range map[string]error{
		"Acquire": acq, "AcquireQueued": que, "Extend": ext, "Release": s.Release(ctx, "k", a),
		"Transfer": tra, "Inspect": ins, "Waiters": wai, "KeepAlive": kee,
		"List": s.List(ctx, "", func(string, driver.Info) bool { return true }),
	} {
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s after Close = %v, want ErrInvalid", name, err)
		}
	}
	if conn.State() != zk.StateHasSession {
		t.Errorf("Close of a store made with New closed its conn (state %v)", conn.State())
	}
	kids, _, err := conn.Children(root + "/k")
	if err != nil || len(kids) != 1 {
		t.Errorf("the held node after Close: %v, %v; want it kept until the session ends", kids, err)
	}
	if _, err := s.Acquire(ctx, "k2", tok(), time.Second); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Acquire after Close wrote or answered: %v", err)
	}
	if ok, _, err := conn.Exists(root + "/k2"); err != nil || ok {
		t.Errorf("calls after Close created %s/k2 (%v)", root, err)
	}
}
