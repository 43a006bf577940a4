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

// Break frees key in store whoever holds it, all its holds at once, and
// returns the holding it ended: an operator's way out of a holder that hung
// without dying (dlock release --force). The holder is not stopped: its
// Lease reports the loss (ErrLost, cause ErrTaken) at its next renewal, and
// until then it may still act as the holder, so break only a holder you know
// to be stuck. The next holding of key gets a fence greater than the broken
// one's, so fenced writes of the broken holder are refused.
//
// A free key returns Held false and changes nothing. An invalid key returns
// an error matching ErrInvalid and a store without driver.Breaker one
// matching errors.ErrUnsupported, both before any I/O. Other errors are the
// store's (docs/stores.md says what each store does): one matching no
// sentinel means the break may or may not have happened; Inspect tells.
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
