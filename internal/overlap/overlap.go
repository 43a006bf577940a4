// Package overlap records, for tests, the windows in which lock holders
// acted as holders, and finds those that intersect: two windows that
// intersect are two holders at once. Windows are taken on one process's
// monotonic clock, so every holder compared must run in that process.
package overlap

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// Window is one holding as its holder saw it: from the return of Lock to
// the moment it stopped (its work done, or its lease's Done seen).
type Window struct {
	Who      string
	From, To time.Time
	Fence    uint64
	Lost     bool          // ended because Done closed
	Release  time.Duration // how long the holder's release took, if measured
	RelErr   error         // the release's error, if measured
}

// Recorder collects windows and Lock errors from many goroutines. Its zero
// value is ready to use.
type Recorder struct {
	mu   sync.Mutex
	ws   []Window
	errs map[string]int // Lock errors by kind
}

// Add records w.
func (r *Recorder) Add(w Window) {
	r.mu.Lock()
	r.ws = append(r.ws, w)
	r.mu.Unlock()
}

// Fail counts a Lock error by kind: ctx, unavailable, not-acquired or
// other.
func (r *Recorder) Fail(err error) {
	kind := "other"
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		kind = "ctx"
	case errors.Is(err, driver.ErrUnavailable):
		kind = "unavailable"
	case errors.Is(err, driver.ErrNotAcquired):
		kind = "not-acquired"
	}
	r.mu.Lock()
	if r.errs == nil {
		r.errs = map[string]int{}
	}
	r.errs[kind]++
	r.mu.Unlock()
}

// Windows returns a copy of the windows recorded so far.
func (r *Recorder) Windows() []Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ws)
}

// Errs returns a copy of the Lock error counts by kind.
func (r *Recorder) Errs() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.errs)
}

// StartedAfter counts the windows that started after t.
func (r *Recorder) StartedAfter(t time.Time) int {
	n := 0
	for _, w := range r.Windows() {
		if w.From.After(t) {
			n++
		}
	}
	return n
}

// Overlaps returns the pairs of windows that intersect, described.
func (r *Recorder) Overlaps() []string {
	ws := r.Windows()
	slices.SortFunc(ws, func(a, b Window) int { return a.From.Compare(b.From) })
	var out []string
	for i := range ws {
		for j := i + 1; j < len(ws) && ws[j].From.Before(ws[i].To); j++ {
			out = append(out, fmt.Sprintf("%s [fence %d, lost %v] and %s [fence %d] overlap by %v",
				ws[i].Who, ws[i].Fence, ws[i].Lost, ws[j].Who, ws[j].Fence, ws[i].To.Sub(ws[j].From)))
		}
	}
	return out
}
