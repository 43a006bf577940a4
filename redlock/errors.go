package redlock

import (
	"errors"
	"fmt"

	"example.com/dlock/driver"
)

// ErrNoQuorum means too few nodes answered for the operation to reach a
// majority: they were down, paused, partitioned or slower than the node
// timeout. It matches driver.ErrUnavailable, so dlock treats it as an
// unreachable store (backing off and retrying within the wait bound).
var ErrNoQuorum = fmt.Errorf("%w: redlock: no quorum", driver.ErrUnavailable)

// ErrValidityElapsed means a majority granted the lock but the acquisition
// took so long that no validity was left (TTL − elapsed − drift ≤ 0). The
// partial grants have been released. It is wrapped with driver.ErrNotAcquired.
var ErrValidityElapsed = errors.New("redlock: validity elapsed during acquisition")

// NodeError is the failure of one node, as carried in the text of an
// ErrNoQuorum error (node errors are reported, not wrapped, so that a single
// node's contention or context error is not mistaken for the outcome).
type NodeError struct {
	// Node is the node's index in the slice given to New (or NewRedis).
	Node int
	// Err is the node's own error.
	Err error
}

// Error names the node by index and gives its error.
func (e *NodeError) Error() string { return fmt.Sprintf("node %d: %v", e.Node, e.Err) }

// Unwrap returns the node's error.
func (e *NodeError) Unwrap() error { return e.Err }

// errNoReply marks a node that did not answer within the node timeout.
var errNoReply = errors.New("no reply within the node timeout")

// noQuorum builds the ErrNoQuorum error of an operation. ctxErr, if not nil,
// is wrapped so that callers can still match the context's error.
func noQuorum(op string, ok, n, q int, nodeErrs []error, ctxErr error) error {
	detail := errors.Join(nodeErrs...)
	if ctxErr != nil {
		return fmt.Errorf("%w: %s succeeded on %d of %d nodes, %d needed: %w (%v)", ErrNoQuorum, op, ok, n, q, ctxErr, detail)
	}
	return fmt.Errorf("%w: %s succeeded on %d of %d nodes, %d needed (%v)", ErrNoQuorum, op, ok, n, q, detail)
}
