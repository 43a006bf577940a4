package pgstore

import (
	"context"
	"time"

	"example.com/dlock/driver"
)

// Doctor implements driver.Doctor.
func (s *Store) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	return nil
}
