package dlock

import (
	"context"
	"fmt"

	"example.com/dlock/driver"
)

// BrokenHolding is what Break ended: the holding as the store's Inspect
// would have described it just before (Held false: the key was free and
// nothing changed), or a value that was not a lock, removed (NotALock).
type BrokenHolding = driver.BrokenHolding

// Break frees key in store whoever holds it and returns the holding it
// ended (dlock release --force). The holder is not stopped: its Lease
// reports ErrLost (cause ErrTaken) at its next renewal, and the next holding
// gets a greater fence. A free key returns Held false and changes nothing.
// An invalid key matches ErrInvalid, a store without driver.Breaker
// errors.ErrUnsupported, both before any I/O; an error matching no sentinel
// means the break may or may not have happened (docs/api.md, "Break").
func Break(ctx context.Context, store driver.Store, key string) (BrokenHolding, error) {
	if err := ValidateKey(key); err != nil {
		return BrokenHolding{}, err
	}
	b, ok := driver.As[driver.Breaker](store)
	if !ok {
		return BrokenHolding{}, driver.Unsupported(fmt.Sprintf("break %q", key), "the store cannot break locks (it has no driver.Breaker)")
	}
	return b.Break(ctx, key)
}
