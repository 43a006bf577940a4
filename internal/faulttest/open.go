package faulttest

import (
	"context"
	"fmt"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// OpenAndLock opens the store at rawURL (its package must be imported, so
// that its scheme is registered), takes key through a dlock Client and
// releases it, then closes the Client and the store. It returns the first
// error (opening, locking or releasing), and the URL tests use it both to
// show that a URL works and, bounded by ctx, that one is refused.
func OpenAndLock(ctx context.Context, rawURL, key string) error {
	o, err := driver.Open(ctx, rawURL)
	if err != nil {
		return err
	}
	defer o.Close()
	m, ok := o.Store.(driver.Mutex)
	if !ok {
		return fmt.Errorf("%w: %s offers no mutex", driver.ErrInvalid, o.Describe)
	}
	c, err := dlock.New(m)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	l, err := c.Lock(ctx, key)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}
