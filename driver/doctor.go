package driver

import (
	"context"
	"time"
)

// Status is the verdict of one doctor check.
type Status int

// Verdicts, from best to worst.
const (
	OK Status = iota
	Warn
	Fail
)

// Check is the result of one doctor check.
type Check struct {
	Name   string
	Status Status
	// Detail says what was found and, when not OK, what to do.
	Detail string
}

// Doctor runs the checks that matter for locking on a store (permissions,
// server version, clock, session timeouts) for dlock doctor.
//
// Absent: dlock doctor only checks that a lock can be taken and released.
type Doctor interface {
	// Doctor runs the store's checks for a lease of length ttl. It makes no
	// lasting change (a probe lock is released).
	Doctor(ctx context.Context, ttl time.Duration) []Check
}
