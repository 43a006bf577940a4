package drivertest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"example.com/dlock"
)

// modelCheck records every lease a model run takes and checks invariant
// (1): while a lease reports itself valid, no other owner holds the key.
//
// A lease "reports itself valid" at time t if Err() returns nil at t: the
// Client's Err already reports the loss from ValidUntil on, on the local
// monotonic clock, which is the clock used here. Each observation takes
// time.Now() before calling Err, so a nil Err means the lease was valid at
// that instant; a lease is valid from its creation until it ends, so it
// was valid throughout [first, last] of its observations. Two leases of
// different owners (tokens) whose intervals overlap were both valid at one
// instant, so the store held the key for at most one of them: a violation,
// with no slack needed. Leases are observed when taken, before each step
// of their holder, and by a sampler every samplePeriod.
//
// Two more observations count as violations: the store answering "not
// held" (a loss matching ErrLost and ErrNotHeld, from Extend or renewal,
// or from Release of a lease valid just before) at a moment before the
// lease's ValidUntil: the store's record did not outlive the lease. The
// moment is taken after the answer arrived, so it is late, never early.
type modelCheck struct {
	start time.Time
	stop  chan struct{} // closed at the end of the run: the watchers stop
	wg    sync.WaitGroup

	mu     sync.Mutex
	leases []*watched
	found  []string
	trace  []string
	lost   int // trace lines dropped at the front
}

// watched is one lease of the run.
type watched struct {
	l     *dlock.Lease
	who   string // actor and call, for the report
	owned bool   // taken as an explicit Owner (or nested in a Do)
	fixed bool   // a WithTTL lease: not renewed
	// first and last are the first and last instants the lease was seen
	// valid (zero: never). Guarded by modelCheck.mu.
	first, last time.Time
	ended       bool
}

// maxTrace bounds the trace kept for the report (the last lines).
const maxTrace = 400

// samplePeriod is how often the sampler observes the live leases.
const samplePeriod = 5 * time.Millisecond

func newModelCheck() *modelCheck {
	c := &modelCheck{start: time.Now(), stop: make(chan struct{})}
	c.wg.Add(1)
	go c.sample()
	return c
}

// at formats t relative to the run's start.
func (c *modelCheck) at(t time.Time) string {
	return fmt.Sprintf("+%dms", t.Sub(c.start).Milliseconds())
}

// logf adds a line to the run's trace.
func (c *modelCheck) logf(format string, args ...any) {
	line := c.at(time.Now()) + " " + fmt.Sprintf(format, args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.trace) >= maxTrace {
		c.trace = c.trace[1:]
		c.lost++
	}
	c.trace = append(c.trace, line)
}

// violation records a broken invariant.
func (c *modelCheck) violation(format string, args ...any) {
	msg := c.at(time.Now()) + " " + fmt.Sprintf(format, args...)
	c.mu.Lock()
	c.found = append(c.found, msg)
	c.mu.Unlock()
	c.logf("VIOLATION: %s", msg)
}

// acquired records a lease just returned to who and starts watching it.
func (c *modelCheck) acquired(who string, l *dlock.Lease, owned, fixed bool) *watched {
	w := &watched{l: l, who: who, owned: owned, fixed: fixed}
	c.mu.Lock()
	c.leases = append(c.leases, w)
	c.mu.Unlock()
	c.observe(w)
	c.logf("%s: acquired, fence %d, holds %d, valid for %v", who, l.Fence(), l.Holds(), time.Until(l.ValidUntil()).Round(time.Millisecond))
	c.wg.Add(1)
	go c.watch(w)
	return w
}

// observe records whether w reports itself valid now, and returns it.
func (c *modelCheck) observe(w *watched) bool {
	t := time.Now() // before Err: a nil Err means valid at t
	ok := w.l.Err() == nil
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.first.IsZero() || t.Before(w.first) {
		w.first = t
	}
	if t.After(w.last) {
		w.last = t
	}
	return true
}

// watch waits for w to end and checks how: a "not held" from the store
// before ValidUntil is a violation.
func (c *modelCheck) watch(w *watched) {
	defer c.wg.Done()
	select {
	case <-w.l.Done():
	case <-c.stop:
		return
	}
	t := time.Now()
	err := w.l.Err()
	c.mu.Lock()
	w.ended = true
	c.mu.Unlock()
	c.logf("%s: ended: %v", w.who, err)
	if errors.Is(err, dlock.ErrLost) && errors.Is(err, dlock.ErrNotHeld) {
		if vu := w.l.ValidUntil(); t.Before(vu) {
			c.violation("%s (fence %d): the store said the key is not held (%v) %v before the lease's validity ended",
				w.who, w.l.Fence(), err, vu.Sub(t).Round(time.Millisecond))
		}
	}
}

// released checks Release's answer for w, which was seen valid just
// before the call if validBefore.
func (c *modelCheck) released(w *watched, validBefore bool, err error) {
	t := time.Now()
	c.logf("%s: Release: %v", w.who, err)
	if validBefore && errors.Is(err, dlock.ErrLost) && errors.Is(err, dlock.ErrNotHeld) {
		if vu := w.l.ValidUntil(); t.Before(vu) {
			c.violation("%s (fence %d): Release of a valid lease found the key not held (%v), %v before the lease's validity ended",
				w.who, w.l.Fence(), err, vu.Sub(t).Round(time.Millisecond))
		}
	}
}

// sample observes every live lease each samplePeriod until the run stops.
func (c *modelCheck) sample() {
	defer c.wg.Done()
	tick := time.NewTicker(samplePeriod)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		live := make([]*watched, 0, len(c.leases))
		for _, w := range c.leases {
			if !w.ended {
				live = append(live, w)
			}
		}
		c.mu.Unlock()
		for _, w := range live {
			c.observe(w)
		}
	}
}

// finish stops the watchers and returns the violations: those recorded,
// then every pair of leases of different owners that were valid at one
// instant.
func (c *modelCheck) finish() []string {
	close(c.stop)
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	found := append([]string(nil), c.found...)
	for i, a := range c.leases {
		for _, b := range c.leases[i+1:] {
			if a.l.Token() == b.l.Token() || a.first.IsZero() || b.first.IsZero() {
				continue
			}
			if a.first.After(b.last) || b.first.After(a.last) {
				continue
			}
			both := a.first
			if b.first.After(both) {
				both = b.first
			}
			found = append(found, fmt.Sprintf("two owners held the key at once: %s (fence %d, seen valid %s..%s) and %s (fence %d, seen valid %s..%s) both reported themselves valid at %s",
				a.who, a.l.Fence(), c.at(a.first), c.at(a.last), b.who, b.l.Fence(), c.at(b.first), c.at(b.last), c.at(both)))
		}
	}
	return found
}

// live returns the leases that have not ended.
func (c *modelCheck) live() []*watched {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ws []*watched
	for _, w := range c.leases {
		if w.l.Err() == nil {
			ws = append(ws, w)
		}
	}
	return ws
}

// report returns the trace, its last n lines.
func (c *modelCheck) report(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	lines := c.trace
	skipped := c.lost
	if len(lines) > n {
		skipped += len(lines) - n
		lines = lines[len(lines)-n:]
	}
	head := ""
	if skipped > 0 {
		head = fmt.Sprintf("(%d earlier lines left out)\n", skipped)
	}
	return head + strings.Join(lines, "\n")
}
