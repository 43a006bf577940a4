package redisstore

import (
	"context"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// The idempotency records: one hash per record (see idem.lua), named
// PREFIX idem:{<scope in hex>:<key>}, so that its one key is in the slot of
// its hash tag and every script touches that key only (Cluster-safe). The
// scope is written in hex so that no scope and key pair can spell
// another's name. Leases and retention are on the server's clock (TIME).

var (
	//go:embed idem.lua
	idemLua string
	//go:embed idem_begin.lua
	idemBeginLua string
	//go:embed idem_complete.lua
	idemCompleteLua string
	//go:embed idem_abandon.lua
	idemAbandonLua string
	//go:embed idem_extend.lua
	idemExtendLua string

	idemBeginScript    = redis.NewScript(idemLua + idemBeginLua)
	idemCompleteScript = redis.NewScript(idemLua + idemCompleteLua)
	idemAbandonScript  = redis.NewScript(idemLua + idemAbandonLua)
	idemExtendScript   = redis.NewScript(idemLua + idemExtendLua)
)

var _ driver.Idempotency = (*Store)(nil)

// RecordKey returns the Redis key of idempotency record id. It does no I/O
// and does not validate id.
func (s *Store) RecordKey(id driver.RecordID) string {
	return s.prefix + "idem:{" + hex.EncodeToString([]byte(id.Scope)) + ":" + id.Key + "}"
}

// BeginRecord implements driver.Idempotency in one script call (see
// idem_begin.lua): fences of a takeover are max(last + 1, the server's
// TIME in µs), so they keep rising after a record was forgotten too.
// Arguments driver.ValidateRecord refuses match driver.ErrInvalid, before
// any I/O; errors of the server are classified as for Acquire (a key of
// another type: ErrRefused); any other error leaves the outcome unknown.
func (s *Store) BeginRecord(ctx context.Context, id driver.RecordID, token, fingerprint string, lease, retention time.Duration) (driver.RecordBegin, error) {
	if err := driver.ValidateRecord(id, token, fingerprint, lease, retention); err != nil {
		return driver.RecordBegin{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.RecordBegin{}, err
	}
	v, err := idemBeginScript.Run(ctx, s.client, []string{s.RecordKey(id)}, token, fingerprint, ms(lease), ms(retention)).Slice()
	if err != nil {
		return driver.RecordBegin{}, classify(err, id.Key)
	}
	n := make([]int64, min(len(v), 3))
	for i := range n {
		n[i], _ = v[i].(int64)
	}
	switch {
	case len(v) == 4 && n[0] == 1:
		took, _ := v[3].(int64)
		return driver.RecordBegin{State: driver.RecordStarted, Fence: uint64(n[1]), TookOver: took == 1, Remaining: time.Duration(n[2]) * time.Millisecond}, nil
	case len(v) == 3 && n[0] == 2:
		return driver.RecordBegin{State: driver.RecordInFlight, Fence: uint64(n[1]), Remaining: time.Duration(n[2]) * time.Millisecond}, nil
	case len(v) == 4 && n[0] == 3:
		res, _ := v[3].(string)
		b := driver.RecordBegin{State: driver.RecordCompleted, Fence: uint64(n[1]), Remaining: pttl(n[2])}
		if res != "" {
			b.Result = []byte(res)
		}
		return b, nil
	case len(v) == 2 && n[0] == -1:
		st := driver.RecordInFlight
		if n[1] == 1 {
			st = driver.RecordCompleted
		}
		return driver.RecordBegin{}, &driver.FingerprintMismatchError{State: st}
	}
	return driver.RecordBegin{}, fmt.Errorf("redisstore: unexpected idempotency begin reply %v", v)
}

// ownerCall runs an owner-checked idempotency script and turns its reply
// into CompleteRecord's errors: >= 0 nil, -1 the record is gone, -2
// another executor owns it.
func (s *Store) ownerCall(ctx context.Context, sc *redis.Script, id driver.RecordID, token string, fence uint64, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	args = append([]any{token, strconv.FormatUint(fence, 10)}, args...)
	n, err := sc.Run(ctx, s.client, []string{s.RecordKey(id)}, args...).Int64()
	switch {
	case err != nil:
		return classify(err, id.Key)
	case n >= 0:
		return nil
	case n == -1:
		return driver.StaleExecutor(false)
	case n == -2:
		return driver.StaleExecutor(true)
	}
	return fmt.Errorf("redisstore: unexpected idempotency reply %d", n)
}

// CompleteRecord implements driver.Idempotency in one script call (see
// idem_complete.lua). A result over driver.MaxResultLen is a
// *driver.ResultTooLargeError before any I/O; other errors are as for
// BeginRecord.
func (s *Store) CompleteRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, result []byte) error {
	if err := driver.ValidateRecordCall(id, token, 1); err != nil {
		return err
	}
	if err := driver.ValidateResult(result); err != nil {
		return err
	}
	return s.ownerCall(ctx, idemCompleteScript, id, token, fence, result)
}

// AbandonRecord implements driver.Idempotency in one script call (see
// idem_abandon.lua). A resent abandon that already ran (go-redis resends
// after a lost reply) finds the record gone: the stale-executor error with
// ErrExpired. Other errors are as for BeginRecord.
func (s *Store) AbandonRecord(ctx context.Context, id driver.RecordID, token string, fence uint64) error {
	if err := driver.ValidateRecordCall(id, token, 1); err != nil {
		return err
	}
	return s.ownerCall(ctx, idemAbandonScript, id, token, fence)
}

// ExtendRecord implements driver.Idempotency in one script call (see
// idem_extend.lua); errors are as for BeginRecord.
func (s *Store) ExtendRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, lease time.Duration) error {
	if err := driver.ValidateRecordCall(id, token, lease); err != nil {
		return err
	}
	return s.ownerCall(ctx, idemExtendScript, id, token, fence, ms(lease))
}
