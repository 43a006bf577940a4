package redisserver

import (
	"fmt"
	"time"
)

// poll calls check every interval until it returns nil or timeout passes,
// and then returns the last error of check wrapped with what.
func poll(what string, timeout, interval time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisserver: %s not reached within %v: %w", what, timeout, err)
		}
		time.Sleep(interval) // bounded polling, see deadline
	}
}
