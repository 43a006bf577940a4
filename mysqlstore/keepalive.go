package mysqlstore

import (
	"context"
	"errors"
	"fmt"

	"example.com/dlock/driver"
)

var _ driver.SessionKeeper = (*SessionStore)(nil)

// KeepAlive implements driver.SessionKeeper: it checks every connection
// that holds keys with one round trip each (SELECT 1), which also resets
// the server's idle timer (wait_timeout), so an idle holder is not
// disconnected. A connection that fails is discarded and its keys
// forgotten (the server released them), and KeepAlive returns an error
// matching driver.NotHeld(false). With nothing held it does nothing. If ctx
// ends first it returns ctx's error and forgets nothing; after Close,
// driver.ErrInvalid.
func (s *SessionStore) KeepAlive(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eng.Closed() {
		return errClosed
	}
	var errs []error
	for _, pc := range s.eng.Pins.Conns(false) {
		_, err := s.eng.Pins.Run(ctx, pc, func(ctx context.Context, c *conn) (any, error) {
			var one int
			return nil, c.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		}, nil)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.eng.Lose(pc) // the connection is gone, and with it its locks
		errs = append(errs, wrap("session: keepalive", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", driver.NotHeld(false), errors.Join(errs...))
	}
	return nil
}
