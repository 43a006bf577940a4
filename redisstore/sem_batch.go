package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var _ driver.PermitBatchExtender = (*Store)(nil)

// ExtendPermitsBatch implements driver.PermitBatchExtender: one pipeline of
// extend script calls (one per request; on a Cluster, one per node), so
// that a Semaphores renews every permit due together in one round trip. A
// request that fails the checks of ExtendPermits gets that error and is
// not sent; each other result is what ExtendPermits would have returned.
func (s *Store) ExtendPermitsBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		out[i].Err = checkSem(ctx, r.Key, 1, 1, r.TTL)
	}
	cmds, err := s.semExtendPipeline(ctx, reqs, out)
	if err != nil && isNoScript(err) {
		if err = semExtendScript.Load(ctx, s.client).Err(); err == nil {
			cmds, _ = s.semExtendPipeline(ctx, reqs, out)
		}
	}
	for i, c := range cmds {
		if c == nil {
			continue
		}
		v, err := c.Int64Slice()
		if v, err = extendReply(v, err, "semaphore", reqs[i].Key); err != nil {
			out[i].Err = err
			continue
		}
		out[i].Grant = driver.Grant{Fence: uint64(v[1]), Holds: int(v[2]), TTL: reqs[i].TTL}
	}
	return out
}

// semExtendPipeline sends the extend of every request not refused in out.
func (s *Store) semExtendPipeline(ctx context.Context, reqs []driver.ExtendRequest, out []driver.ExtendResult) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(reqs))
	pipe := s.client.Pipeline()
	for i, r := range reqs {
		if out[i].Err == nil {
			h, z := s.SemaphoreKeys(r.Key)
			cmds[i] = semExtendScript.EvalSha(ctx, pipe, []string{h, z}, r.Token, ms(r.TTL), s.keep)
		}
	}
	if pipe.Len() == 0 {
		return cmds, nil
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}
