package redlock

import (
	"sync"
	"testing"
	"time"

	"example.com/dlock/internal/testkit"
)

// TestPoolReapsSurplusUnderTraffic: the workers a burst started are reaped
// after the idle period even while a caller keeps handing over one task at
// a time: the most recently parked worker takes each task, so the others
// stay idle.
func TestPoolReapsSurplusUnderTraffic(t *testing.T) {
	const burst = 16
	p := newPool(64)
	p.idle = 20 * time.Millisecond
	defer p.close()
	live := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.workers
	}
	release := make(chan struct{})
	var inCall sync.WaitGroup
	inCall.Add(burst)
	for range burst {
		p.do(task{func(int) { inCall.Done(); <-release }, 0})
	}
	inCall.Wait() // all at once: one worker each
	close(release)
	if n := live(); n != burst {
		t.Fatalf("%d workers after a burst of %d blocked tasks", n, burst)
	}
	done := make(chan struct{})
	testkit.WaitFor(t, 5*time.Second, "the burst's surplus to be reaped", func() bool {
		p.do(task{func(int) { done <- struct{}{} }, 0})
		<-done
		return live() <= 2
	})
}
