package redlock_test

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// section is one critical section as seen by the process (one monotonic
// clock: all test clients are goroutines of this process).
type section struct {
	start, end time.Time
	fence      uint64
	client     int
}

// recorder collects critical sections and checks the invariants: no two
// sections overlap in time, and fences strictly increase in section order.
type recorder struct {
	mu            sync.Mutex
	secs          []section
	releaseFailed atomic.Int64 // releases that reached no majority (tolerated)
	waitsTimedOut atomic.Int64 // Lock calls whose wait bound elapsed (liveness, judged by minSections)
}

// run records fn as a critical section of client with fence.
func (r *recorder) run(client int, fence uint64, fn func()) {
	start := time.Now()
	fn()
	end := time.Now()
	r.mu.Lock()
	r.secs = append(r.secs, section{start, end, fence, client})
	r.mu.Unlock()
}

// check returns the overlapping pairs of consecutive sections (by start) and
// the fence regressions among them, with a few examples.
func (r *recorder) check() (n, overlaps, regressions int, examples []string) {
	r.mu.Lock()
	secs := append([]section(nil), r.secs...)
	r.mu.Unlock()
	sort.Slice(secs, func(i, j int) bool { return secs[i].start.Before(secs[j].start) })
	latestEnd := time.Time{}
	var prevFence uint64
	for i, s := range secs {
		if i > 0 && s.start.Before(latestEnd) {
			overlaps++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("client %d fence %d started %v before the previous section ended",
					s.client, s.fence, latestEnd.Sub(s.start)))
			}
		}
		if i > 0 && s.fence <= prevFence {
			regressions++
		}
		prevFence = s.fence
		if s.end.After(latestEnd) {
			latestEnd = s.end
		}
	}
	return len(secs), overlaps, regressions, examples
}

func (r *recorder) assertClean(t *testing.T, minSections int) {
	t.Helper()
	n, over, regr, ex := r.check()
	t.Logf("%d critical sections, %d overlaps, %d fence regressions, %d releases without quorum, %d waits timed out",
		n, over, regr, r.releaseFailed.Load(), r.waitsTimedOut.Load())
	if n < minSections {
		t.Errorf("%d critical sections, want at least %d", n, minSections)
	}
	if over > 0 || regr > 0 {
		t.Errorf("%d overlaps, %d fence regressions: %v", over, regr, ex)
	}
}
