package redlock

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
)

// Defaults of Options.
const (
	// DefaultNodeTimeout bounds each node's answer to one call.
	DefaultNodeTimeout = 50 * time.Millisecond
	// DefaultDriftFactor is the share of the TTL set aside for clock-rate
	// differences between the client and the nodes (2 ms are added to it).
	DefaultDriftFactor = 0.01
	// RecommendedNodes is the node count the Redis documentation recommends:
	// five independent primaries tolerate two failures.
	RecommendedNodes = 5
)

// coreDriftFactor is the drift dlock's Client already subtracts from every
// grant (ttl/100 + 2 ms): the store only shortens Grant.TTL by what its own
// drift adds on top of that, so the drift is counted exactly once.
const coreDriftFactor = 0.01

// Options configures a Store. The zero value (or nil) gives the defaults.
type Options struct {
	// NodeTimeout bounds each node's answer to one call (acquire, extend,
	// release, fence raise). It must be much smaller than the TTL: for a TTL
	// below 3×NodeTimeout the store uses TTL/3 instead, so that the two round
	// trips of an acquisition (grant and fence raise) leave at least a third
	// of the TTL, less drift, however slow the nodes.
	// Default: DefaultNodeTimeout (50 ms).
	NodeTimeout time.Duration
	// DriftFactor is the share of the TTL subtracted from the validity for
	// clock drift; 2 ms are added to it. Default: DefaultDriftFactor (0.01).
	DriftFactor float64
	// DisableFencing turns fencing off: grants then carry Fence 0 (no
	// fencing token), and over nodes that are not all FencedReleasers the
	// fence-raise round trip after each first acquisition is skipped.
	// Default: false; fencing is also off when any node does not implement
	// FenceRaiser.
	DisableFencing bool
	// Clock measures the elapsed time of each call (monotonic). Default: the
	// system clock. Tests inject a fake one.
	Clock driver.Clock
}

// Store is a driver.Mutex that holds a lock on a majority of independent
// nodes (the Redlock algorithm). It is safe for concurrent use. It does not
// own the node stores given to New; Close only ends what NewRedis created.
type Store struct {
	nodes   []driver.Mutex
	all     []int // 0..len(nodes)-1, the fan-out set of most calls
	quorum  int
	timeout time.Duration
	drift   float64
	fencing bool
	// lateRaise: fencing, and every node a FencedReleaser: a holding's
	// fence is raised by the release that ends it, not by a round trip
	// after the grant (see Store.raise).
	lateRaise bool
	clock     driver.Clock
	closeFns  []func() error
	flights   flights  // acquisitions still in progress on some node
	pool      *pool    // runs the node calls of every fan-out
	reg       registry // where each hold of each holding landed, and its fence
	// callPrefix starts the call id of each acquisition ("" if some node
	// is not a CallUndoer); callSeq numbers them.
	callPrefix string
	callSeq    atomic.Uint64
}

var (
	_ driver.Mutex         = (*Store)(nil)
	_ driver.Notifier      = (*Store)(nil)
	_ driver.BatchExtender = (*Store)(nil)
)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) driver.Timer {
	return time.AfterFunc(d, f)
}

// New returns a Redlock store over nodes, which should be independent
// primaries (no replication between them); RecommendedNodes (5) is the
// recommended count. Fewer than 3 nodes are accepted but tolerate no failure
// (1 node: a single server; 2 nodes: both must answer). It returns an error
// matching driver.ErrInvalid, and makes no network call, if nodes is empty,
// has more than MaxNodes entries, contains nil, or an option is out of
// range.
func New(nodes []driver.Mutex, opts *Options) (*Store, error) {
	if len(nodes) == 0 || len(nodes) > MaxNodes {
		return nil, fmt.Errorf("%w: redlock needs 1 to %d nodes, got %d", driver.ErrInvalid, MaxNodes, len(nodes))
	}
	s := &Store{nodes: append([]driver.Mutex(nil), nodes...), quorum: len(nodes)/2 + 1,
		timeout: DefaultNodeTimeout, drift: DefaultDriftFactor, fencing: true, clock: systemClock{},
		pool: newPool(workersPerNode * len(nodes))}
	undo, lateRaise := true, true
	for i, n := range nodes {
		if n == nil {
			return nil, fmt.Errorf("%w: redlock node %d is nil", driver.ErrInvalid, i)
		}
		if _, ok := n.(FenceRaiser); !ok {
			s.fencing = false
		}
		if _, ok := n.(CallUndoer); !ok {
			undo = false
		}
		if _, ok := n.(FencedReleaser); !ok {
			lateRaise = false
		}
		s.all = append(s.all, i)
	}
	s.reg.quorum = s.quorum
	if undo {
		s.callPrefix = newCallPrefix()
	}
	if opts != nil {
		if err := s.apply(opts); err != nil {
			return nil, err
		}
	}
	s.lateRaise = s.fencing && lateRaise
	return s, nil
}

func (s *Store) apply(o *Options) error {
	switch {
	case o.NodeTimeout < 0:
		return fmt.Errorf("%w: negative node timeout", driver.ErrInvalid)
	case o.DriftFactor < 0 || o.DriftFactor >= 0.5 || math.IsNaN(o.DriftFactor):
		return fmt.Errorf("%w: drift factor %v outside [0, 0.5)", driver.ErrInvalid, o.DriftFactor)
	}
	if o.NodeTimeout > 0 {
		s.timeout = o.NodeTimeout
	}
	if o.DriftFactor > 0 {
		s.drift = o.DriftFactor
	}
	if o.DisableFencing {
		s.fencing = false
	}
	if o.Clock != nil {
		s.clock = o.Clock
	}
	return nil
}

// Quorum returns the number of nodes that must agree: len(nodes)/2 + 1.
func (s *Store) Quorum() int { return s.quorum }

// Fencing reports whether grants carry fencing tokens (see the package
// documentation for exactly what they promise).
func (s *Store) Fencing() bool { return s.fencing }

// Close stops the store's idle worker goroutines and ends the node stores
// that NewRedis created (their pub/sub connections). It does not close
// clients, nor stores given to New. A store that is never closed loses its
// idle workers within two seconds of its last call anyway. Calls after Close
// still work as far as the nodes do: their node calls then run on one-off
// goroutines. It returns the node stores' Close errors, joined (nil for a
// store from New, which closes no node store).
func (s *Store) Close() error {
	s.pool.close()
	var errs []error
	for _, f := range s.closeFns {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// nodeTimeout is the per-node bound for a call with lease length ttl.
func (s *Store) nodeTimeout(ttl time.Duration) time.Duration {
	return max(time.Millisecond, min(s.timeout, ttl/3))
}

// driftOf is the store's drift allowance for ttl: ttl×factor + 2 ms.
func (s *Store) driftOf(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*s.drift) + 2*time.Millisecond
}

// grantTTL is the Grant.TTL reported for a lease of ttl: counted, as the
// driver.Mutex contract says, from the start of the call. Every node set its
// expiry after the call started, so all of them keep the key for ttl from
// then; dlock's Client subtracts its own drift (ttl/100 + 2 ms) and the
// elapsed time is accounted for by counting from the start, so the store only
// removes the part of its drift allowance the Client does not.
func (s *Store) grantTTL(ttl time.Duration) time.Duration {
	core := time.Duration(float64(ttl)*coreDriftFactor) + 2*time.Millisecond
	return ttl - max(0, s.driftOf(ttl)-core)
}

// stampOf is the registry's timing of a successful call that started at
// start with lease length ttl (see stamp).
func (s *Store) stampOf(start time.Time, ttl time.Duration) stamp {
	return stamp{start: start, validUntil: start.Add(s.validLeft(ttl, 0)), expires: start.Add(2 * ttl)}
}

// validLeft is Redlock's validity after elapsed: ttl − elapsed − drift.
func (s *Store) validLeft(ttl, elapsed time.Duration) time.Duration {
	return ttl - elapsed - s.driftOf(ttl)
}

// kthLargest returns the k-th largest of vs (k from 1), or 0 if there are
// fewer than k values: the largest value that at least k entries reach.
func kthLargest[T int | uint64 | time.Duration](vs []T, k int) T {
	if k < 1 || len(vs) < k {
		var zero T
		return zero
	}
	s := append([]T(nil), vs...)
	sort.Slice(s, func(i, j int) bool { return s[i] > s[j] })
	return s[k-1]
}

// Model implements driver.Mutex: per-key TTLs in milliseconds, at least
// 10 ms, on each node's clock; the validity a grant reports is counted on the
// client's clock, less elapsed time and drift, so ServerClock is false.
func (s *Store) Model() driver.Model {
	return driver.Model{MinTTL: 10 * time.Millisecond, Granularity: time.Millisecond}
}
