package redlock

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// FenceRaiser is the node capability Redlock fencing needs. A Store's grants
// carry fencing tokens only if every node implements it (RedisNode does).
type FenceRaiser interface {
	// RaiseFence records fence as the fence of token's holding of key, if
	// token holds key, and makes key's last fence (from which the node's
	// next fence follows) at least fence if token holds key or key is
	// free; it changes nothing while another token holds key (that
	// holding's fence must not move). It reports whether token holds key.
	// Errors mean the node could not be reached or failed.
	RaiseFence(ctx context.Context, key, token string, fence uint64) (bool, error)
}

// FencedReleaser is the node capability that lets a Store raise a holding's
// fence with the release that ends the holding, instead of in a round trip
// of its own after the grant (see Store.raise). RedisNode has it
// (redisstore.Store.ReleaseFence); a wrapper hides it unless it has it too.
type FencedReleaser interface {
	// ReleaseFence is driver.Mutex.Release, except that a release that
	// frees key leaves its last fence (from which the node's next fence
	// follows) at least fence.
	ReleaseFence(ctx context.Context, key, token string, fence uint64) error
}

var _ FencedReleaser = (*RedisNode)(nil)

var (
	//go:embed raise_fence.lua
	raiseSrc    string
	raiseScript = redis.NewScript(raiseSrc)
)

// RedisNode is one Redlock node on an independent Redis primary: the
// single-Redis store plus the fence raise. It is safe for concurrent use and
// does not own the client.
type RedisNode struct {
	*redisstore.Store
	client redis.UniversalClient
}

var _ FenceRaiser = (*RedisNode)(nil)

// NewRedisNode returns a node over client with the given key prefix (empty:
// redisstore.DefaultPrefix). It returns an error matching driver.ErrInvalid if
// client is nil. It makes no network call.
//
// Configure the client with ClientOptions (or equivalent settings): the
// Store is the retry layer, and the node timeout should bound the I/O.
func NewRedisNode(client redis.UniversalClient, prefix string) (*RedisNode, error) {
	s, err := redisstore.New(client, &redisstore.Options{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	return &RedisNode{Store: s, client: client}, nil
}

// ClientOptions adjusts go-redis options for a Redlock node:
//
//   - ContextTimeoutEnabled: the node timeout (a context deadline) bounds the
//     socket I/O; otherwise a hung node keeps the call's goroutine until the
//     client's ReadTimeout (the Store stops waiting at the node timeout
//     either way);
//   - MaxRetries -1: a command retried by the client after a network error
//     may run twice on the node (an acquire by the same token then counts
//     two holds), and hides the failure from the quorum count;
//   - DialerRetries 1: a dial retried in the background can deliver an
//     acquisition to a node long after its caller gave up (a stray key that
//     blocks that node until its TTL).
//
// The Store tolerates any settings; these make its timing match its
// documentation.
func ClientOptions(o *redis.Options) {
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DialerRetries = 1
}

// RaiseFence implements FenceRaiser with one script call. Its error, if
// any, is go-redis's as is (the raise may or may not have been applied); it
// does not validate key (the Store passes keys it validated).
func (n *RedisNode) RaiseFence(ctx context.Context, key, token string, fence uint64) (bool, error) {
	lock, counter := n.Keys(key)
	v, err := raiseScript.Run(ctx, n.client, []string{lock, counter}, token, strconv.FormatUint(fence, 10)).Int64()
	return v == 1, err
}

// NewRedis returns a Redlock store over one RedisNode per client, all with
// the same key prefix (empty: redisstore.DefaultPrefix). The clients must
// reach independent primaries; RecommendedNodes (5) is the recommended
// count. Close ends the nodes' pub/sub connections but not the clients.
// Errors are as for New.
func NewRedis(clients []redis.UniversalClient, prefix string, opts *Options) (*Store, error) {
	nodes := make([]driver.Mutex, len(clients))
	var closers []func() error
	for i, c := range clients {
		n, err := NewRedisNode(c, prefix)
		if err != nil {
			return nil, fmt.Errorf("redlock node %d: %w", i, err)
		}
		nodes[i] = n
		closers = append(closers, n.Close)
	}
	s, err := New(nodes, opts)
	if err != nil {
		return nil, err
	}
	s.closeFns = closers
	return s, nil
}

// raise sets the fence of a new holding on the nodes that granted it and
// requires a majority of them to confirm that they still hold it. This is
// what makes fences increase across holdings: any later majority shares a
// node with this one, whose last fence is then at least fence (or, once the
// node lost it, whose clock has passed it: see the package doc), so that
// node's next grant, and the later holding's maximum, exceed fence.
//
// Over FencedReleaser nodes (lateRaise) the Store does not call it: the
// release that ends the holding carries fence to every node instead. That
// is enough, because a node keeps a fence only in the holding's own lock
// value until then: until the release no other holding can start on it,
// and a lock value that expires unreleased is forgotten either way.
func (s *Store) raise(ctx context.Context, key, token string, ttl time.Duration, fence uint64, granted []int) error {
	q := s.quorum
	rs := fanout(ctx, s.pool, s.nodeTimeout(ttl), granted, func(ctx context.Context, i int) (bool, error) {
		return s.nodes[i].(FenceRaiser).RaiseFence(ctx, key, token, fence)
	}, func(rs []reply[bool]) bool {
		ok := 0
		for _, r := range rs {
			if r.answered && r.err == nil && r.val {
				ok++
			}
		}
		return ok >= q
	}, nil)
	ok := 0
	var errs []error
	for pos, r := range rs {
		switch {
		case r.err == nil && r.val:
			ok++
		case r.err == nil:
			errs = append(errs, &NodeError{Node: granted[pos], Err: fmt.Errorf("%w: lost before the fence raise", driver.ErrNotHeld)})
		default:
			errs = append(errs, &NodeError{Node: granted[pos], Err: r.err})
		}
	}
	if ok >= q {
		return nil
	}
	return noQuorum("fence raise", ok, len(s.nodes), q, errs, ctx.Err())
}
