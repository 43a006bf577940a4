// Package fakeclock is a clock for tests that moves only when told to:
// Advance runs the callbacks that fall due, synchronously, in the caller's
// goroutine, so a test decides exactly when a timer fires.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a manually advanced clock. The zero value starts at the zero
// time; New starts at a fixed, arbitrary instant.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*Timer
}

// Timer is a callback armed on a Clock.
type Timer struct {
	c    *Clock
	at   time.Time
	f    func()
	done bool
}

// New returns a clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms f to run when the clock has been advanced by d or more.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop disarms t, reporting whether it was still armed.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves time forward by d and runs, synchronously and in arming
// order, the callbacks that fall due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if !t.done && !t.at.After(c.now) {
			t.done = true
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// Pending returns how many timers are armed.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}
