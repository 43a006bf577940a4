package dlock

import (
	"fmt"
	"sync"
)

// FenceGate is the resource side of fencing for state kept in one process: it
// admits an operation only if its fencing token is at least the highest one
// admitted before for the same resource, so a holder that lost its lock
// (paused past its lease, say) cannot overwrite the work of a later holder.
// The zero value is ready to use and safe for concurrent use.
//
// Resources in a database do the same check in the write itself, atomically:
// for example UPDATE … SET v = $1, fence = $2 WHERE id = $3 AND fence <= $2.
type FenceGate struct {
	mu      sync.Mutex
	highest map[string]uint64
}

// Admit runs fn if fence is not lower than the highest fence admitted for
// resource, holding the gate for resource's check and fn together. Otherwise
// it returns an error matching ErrStaleFence and does not run fn. fn's error
// is returned as is; the fence counts as admitted either way. A nil fn only
// admits the fence (a later, lower one is then refused).
func (g *FenceGate) Admit(resource string, fence uint64, fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.highest == nil {
		g.highest = make(map[string]uint64)
	}
	if h := g.highest[resource]; fence < h {
		return fmt.Errorf("%w: %d is below %d for %q", ErrStaleFence, fence, h, resource)
	}
	g.highest[resource] = fence
	if fn == nil {
		return nil
	}
	return fn()
}
