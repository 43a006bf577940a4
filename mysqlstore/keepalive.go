package mysqlstore

import (
	"context"

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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.KeepAlive(ctx, func(ctx context.Context, c *conn) (any, error) {
		var one int
		return nil, c.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	})
}
