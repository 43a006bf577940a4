package driver

import (
	"context"
	"time"
)

// Status is the verdict of one doctor check.
type Status int

// Verdicts, from best to worst.
const (
	// OK: nothing to do.
	OK Status = iota
	// Warn: locking works, with a risk the Detail names.
	Warn
	// Fail: locking is broken or unsafe as configured.
	Fail
)

// Check is the result of one doctor check.
type Check struct {
	// Name names the check ("version", "acl"; "NODE/CHECK" for a check of
	// one of several servers).
	Name string
	// Status is the verdict.
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
	// lasting change (a probe lock is released). It has no error result: a
	// check that cannot run is reported as a Check (Warn or Fail, saying
	// why).
	Doctor(ctx context.Context, ttl time.Duration) []Check
}
