package drivertest_test

import (
	"context"

	"example.com/dlock/driver"
)

var _ driver.Breaker = (*refStore)(nil)

// Break ends key's holding whoever holds it and remembers the broken token,
// so that its Extend and Release answer NotHeld(taken). With the mutation
// breakResetsFence it also restarts the fence counter, so that the next
// holding's fence is lower than the broken one's.
func (r *refStore) Break(ctx context.Context, key string) (driver.BrokenHolding, error) {
	if err := r.reach(ctx); err != nil {
		return driver.BrokenHolding{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.foreign[key] {
		delete(r.foreign, key)
		return driver.BrokenHolding{Info: driver.Info{Held: true, Remaining: -1}, NotALock: true}, nil
	}
	if r.live(key) == nil {
		return driver.BrokenHolding{}, nil
	}
	info := r.info(key)
	r.broken[key] = info.Token
	delete(r.locks, key)
	if r.mut == breakResetsFence {
		r.fence = 0
	}
	r.notify(key)
	return driver.BrokenHolding{Info: info}, nil
}
