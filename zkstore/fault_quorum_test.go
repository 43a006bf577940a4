package zkstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/zkserver"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// Two of the three servers are SIGKILLed while a Client holds one lock.
// Invariants: Lock on another key with a 2 s wait bound fails within the
// bound plus 1 s with an error matching ErrNotAcquired and either
// ErrUnavailable or a context error (no hang); the held lease reports its
// loss within the session timeout plus 1 s of the kill (its session cannot
// be confirmed without a quorum); once the Client, the Store and the
// connection are closed, no goroutine is left (goleak). Control: the same
// check with another connection still open finds its goroutines (the
// detector sees a leak).
func TestQuorumLostLockFailsWithinBound(t *testing.T) {
	e := zkserver.StartEnsemble(t, 3)
	ignore := goleak.IgnoreCurrent()
	ctx := testCtx(t, 60*time.Second)
	s, open, dc := quorumClients(t, ctx, e.Addrs())
	defer s.Close()
	defer open.Close()
	held, err := dc.Lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	e.Kill(0)
	e.Kill(1)

	const bound, slack = 2 * time.Second, time.Second
	start := time.Now()
	_, err = dc.Lock(ctx, "other", dlock.WithWait(bound))
	took := time.Since(start)
	t.Logf("Lock without quorum: %v after %v", err, took.Round(time.Millisecond))
	typed := err != nil && errors.Is(err, dlock.ErrNotAcquired) &&
		(errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "wait bound"))
	var lostAfter time.Duration
	select {
	case <-held.Done():
		lostAfter = time.Since(killedAt)
	case <-time.After(time.Until(killedAt.Add(faultTimeout + slack))):
		lostAfter = -1
	}

	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = dc.Close(cctx)
	cancel()
	_ = s.Close()                     // Dial made its conn: Close closes it
	leakBefore := goleak.Find(ignore) // our own connection is still open: the control
	open.Close()
	leak := goleak.Find(ignore)
	t.Logf("RESULT Lock failed after %v (bound %v): %v; held lease lost %v after the kill; goroutines left after closing: %v; with the connection open: %v",
		took.Round(time.Millisecond), bound, err, lostAfter.Round(time.Millisecond), leak != nil, leakBefore != nil)
	switch {
	case !typed:
		t.Fatalf("Lock without quorum: %v, want ErrNotAcquired with ErrUnavailable or a context error", err)
	case took > bound+slack:
		t.Fatalf("Lock without quorum took %v, bound %v + %v", took, bound, slack)
	case lostAfter < 0:
		t.Fatalf("the held lease did not report its loss within %v of losing the quorum", faultTimeout+slack)
	case !errors.Is(held.Err(), dlock.ErrLost):
		t.Fatalf("held lease error %v, want ErrLost", held.Err())
	case leak != nil:
		t.Fatalf("goroutines left after closing: %v", leak)
	case leakBefore == nil:
		t.Fatal("control: an open connection's goroutines were not found; the detector sees nothing")
	}
}

// quorumClients returns a Store dialled to addrs, the control's own
// connection (closed by the caller only after the first leak check) and a
// Client on the Store.
func quorumClients(t *testing.T, ctx context.Context, addrs []string) (*zkstore.Store, *zk.Conn, *dlock.Client) {
	s, err := zkstore.Dial(ctx, addrs, zkstore.Options{Root: testPath(t), SessionTimeout: faultTimeout})
	if err != nil {
		t.Fatal(err)
	}
	open, err := dialWait(addrs, faultTimeout)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	dc, err := dlock.New(s, dlock.WithAutoRenew(faultTimeout))
	if err != nil {
		s.Close()
		open.Close()
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	return s, open, dc
}
