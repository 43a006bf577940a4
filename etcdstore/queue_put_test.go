package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
)

// A queued acquisition whose context ends while its put's reply is held
// back (the put reached the server) takes its key out of the queue: left
// there, it would become the holder of a lock nobody uses once the holder
// releases, for as long as the session lives. The control: the key was in
// the queue (Waiters 1) before the cancellation.
func TestQueuedPutWithoutReplyLeavesNothing(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s, p := proxiedStore(t, c, pfx, 0)
	holder, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	if _, err := holder.Acquire(ctx, "q", tok(), time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "warm", tok(), time.Second); err != nil { // the session exists before the hold
		t.Fatal(err)
	}
	release := p.Hold(faultproxy.Downstream)
	qctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.AcquireQueued(qctx, "q", tok(), time.Second)
		done <- err
	}()
	waitFor(t, 10*time.Second, "the waiter's key", func() bool { return waiters(t, holder, "q") == 1 })
	cancel()
	var qerr error
	select {
	case qerr = <-done:
	case <-ctx.Done():
		t.Fatal("AcquireQueued did not return after its context ended")
	}
	release()
	if qerr == nil {
		t.Fatal("a cancelled AcquireQueued returned no error")
	}
	waitFor(t, 3*time.Second, "the waiter's key to go", func() bool { return waiters(t, holder, "q") == 0 })
}
