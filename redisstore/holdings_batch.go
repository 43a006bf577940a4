package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var (
	_ driver.PermitBatchExtender = (*Store)(nil)
	_ driver.RWBatchExtender     = (*Store)(nil)
)

// ExtendPermitsBatch implements driver.PermitBatchExtender: one pipeline of
// extend script calls (one per request; on a Cluster, one per node), so
// that a Semaphores renews every permit due together in one round trip. A
// request that fails the checks of ExtendPermits gets that error and is
// not sent; each other result is what ExtendPermits would have returned.
func (s *Store) ExtendPermitsBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	check := func(key string, ttl time.Duration) error { return checkSem(ctx, key, 1, 1, ttl) }
	return s.extendBatch(ctx, reqs, batchKind{semExtendScript, s.SemaphoreKeys, check, "semaphore"})
}

// ExtendRWBatch implements driver.RWBatchExtender as ExtendPermitsBatch
// does for permits: one pipeline, each result what ExtendRW would have
// returned (Holds 1), a request refused by its checks not sent.
func (s *Store) ExtendRWBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	check := func(key string, ttl time.Duration) error { return checkRW(ctx, key, ttl) }
	out := s.extendBatch(ctx, reqs, batchKind{rwExtendScript, s.RWKeys, check, "read-write lock"})
	for i := range out {
		if out[i].Err == nil {
			out[i].Grant.Holds = 1
		}
	}
	return out
}

// batchKind is what a batch renewal needs of its primitive: the extend
// script (KEYS: hash, expiries; ARGV: token, ttl ms, retention; reply
// {1, fence, holds, ...}), the keys of a lock, the checks made before any
// I/O and the primitive's name for errors.
type batchKind struct {
	script *redis.Script
	keys   func(key string) (hash, expiries string)
	check  func(key string, ttl time.Duration) error
	what   string
}

// extendBatch renews reqs in one pipeline of k's extend script (loading
// the script and sending again once if the server lacks it).
func (s *Store) extendBatch(ctx context.Context, reqs []driver.ExtendRequest, k batchKind) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		out[i].Err = k.check(r.Key, r.TTL)
	}
	cmds, err := s.holdingsPipeline(ctx, reqs, out, k)
	if err != nil && isNoScript(err) {
		if err = k.script.Load(ctx, s.client).Err(); err == nil {
			cmds, _ = s.holdingsPipeline(ctx, reqs, out, k)
		}
	}
	for i, c := range cmds {
		if c == nil {
			continue
		}
		v, err := c.Int64Slice()
		if v, err = extendReply(v, err, k.what, reqs[i].Key); err != nil {
			out[i].Err = err
			continue
		}
		out[i].Grant = driver.Grant{Fence: uint64(v[1]), Holds: int(v[2]), TTL: reqs[i].TTL}
	}
	return out
}

// holdingsPipeline sends the extend of every request not refused in out.
func (s *Store) holdingsPipeline(ctx context.Context, reqs []driver.ExtendRequest, out []driver.ExtendResult, k batchKind) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(reqs))
	pipe := s.client.Pipeline()
	for i, r := range reqs {
		if out[i].Err == nil {
			h, z := k.keys(r.Key)
			cmds[i] = k.script.EvalSha(ctx, pipe, []string{h, z}, r.Token, ms(r.TTL), s.keep)
		}
	}
	if pipe.Len() == 0 {
		return cmds, nil
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}
