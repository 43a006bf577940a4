package redisserver

import (
	"fmt"
	"time"

	"example.com/dlock/internal/proc"
)

// poll calls check every interval until it returns nil or timeout passes,
// and then returns the last error of check wrapped with what.
func poll(what string, timeout, interval time.Duration, check func() error) error {
	if err := proc.Poll(time.Now().Add(timeout), interval, check); err != nil {
		return fmt.Errorf("redisserver: %s not reached within %v: %w", what, timeout, err)
	}
	return nil
}
