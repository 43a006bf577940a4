package testkit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock/internal/testkit"
)

func TestCtxEndsAtItsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testkit.CtxFor(t, time.Second)
		start := time.Now()
		<-ctx.Done()
		if el := time.Since(start); el != time.Second || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("ended after %v with %v, want 1s and DeadlineExceeded", el, ctx.Err())
		}
	})
}

func TestEventually(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !testkit.Eventually(time.Second, func() bool { return time.Since(start) >= 100*time.Millisecond }) {
			t.Fatal("a condition true after 100ms was not seen within 1s")
		}
		if el := time.Since(start); el > 120*time.Millisecond {
			t.Fatalf("seen after %v, want about 100ms (polls of at most 20ms)", el)
		}
		// Control: a condition that never holds is reported false at the deadline.
		var calls atomic.Int64
		start = time.Now()
		if testkit.Eventually(time.Second, func() bool { calls.Add(1); return false }) {
			t.Fatal("Eventually reported a condition that never held")
		}
		if el := time.Since(start); el != time.Second || calls.Load() < 2 {
			t.Fatalf("gave up after %v and %d calls, want 1s and several", el, calls.Load())
		}
	})
}

func TestClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan struct{})
		time.AfterFunc(time.Second, func() { close(ch) })
		start := time.Now()
		testkit.Closed(t, ch, 2*time.Second, "the channel")
		if el := time.Since(start); el != time.Second {
			t.Fatalf("returned after %v, want 1s", el)
		}
	})
}

type closer struct{ closed atomic.Bool }

func (c *closer) Close(context.Context) error { c.closed.Store(true); return nil }

func TestCloseOnCleanup(t *testing.T) {
	c := &closer{}
	t.Run("sub", func(t *testing.T) { testkit.CloseOnCleanup(t, c) })
	if !c.closed.Load() {
		t.Fatal("not closed when the test ended")
	}
}
