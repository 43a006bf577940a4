package sqlsession

import (
	"context"
	"errors"
	"fmt"

	"example.com/dlock/driver"
)

// KeepAlive implements driver.SessionKeeper for the engine's store: it runs
// ping once on every connection that holds keys. A connection whose ping
// fails is killed and its holdings forgotten (the server freed their locks),
// and KeepAlive returns an error matching driver.NotHeld(false) that joins
// the failures. With nothing held it does nothing and returns nil. If ctx
// ends first it returns ctx's error and forgets nothing; after Close, the
// engine's ErrClosed.
func (e *Engine[C, L]) KeepAlive(ctx context.Context, ping Stmt[C]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.Closed() {
		return e.opts.ErrClosed
	}
	var errs []error
	for _, p := range e.Pins.Conns(false) {
		if _, err := e.Pins.Run(ctx, p, ping, nil); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.Lose(p)
			errs = append(errs, fmt.Errorf("%s: session keepalive: %w", e.opts.Name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", driver.NotHeld(false), errors.Join(errs...))
	}
	return nil
}
