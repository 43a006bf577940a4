package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/redisstore"
)

// holdings is what the store said about the holdings that refused
// acquisitions: when each was applied and for how long. An acquire whose
// reply was lost may reach the store after its call returned (it waited in
// the client's batch for a connection, or on the way), and then after the
// release the library sends for it in the background: Client.Lock documents
// that the key then stays held until its TTL ends. The checker cannot tell
// that from a ghost the library left behind (L1) by the client's history
// alone; the store's record of the holding can: a first hold's fence is the
// store's clock when it was applied, and its expiry minus that is its TTL,
// which names the acquire (TTLs are drawn at random, to the nanosecond).
type holdings struct {
	direct *redis.Client // the server, without a proxy
	mu     sync.Mutex
	seen   []seenHolding
	tokens map[string]bool // TokenIDs of the holdings of Do (see known)
}

type seenHolding struct {
	key     string
	owner   string // TokenID of the holding's token
	applied int64  // CLOCK_MONOTONIC ns
	ttl     time.Duration
}

// inspect returns the lock's value, its PTTL and the server's clock in µs,
// read at one instant.
var inspect = redis.NewScript(`
local t = redis.call('TIME')
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), t[1] * 1000000 + t[2]}`)

// look records the holding of key, if the key is held by a first hold.
func (h *holdings) look(ctx context.Context, key string) {
	v, err := inspect.Run(ctx, h.direct, []string{redisstore.DefaultPrefix + "{" + key + "}"}).Slice()
	if err != nil || len(v) != 3 {
		return
	}
	val, _ := v[0].(string)
	pttl, _ := v[1].(int64)
	now, _ := v[2].(int64)
	off := time.Now().UnixNano() - history.Now() // CLOCK_REALTIME − CLOCK_MONOTONIC
	var holds, fence int64
	parts := strings.SplitN(val, ":", 4) // holds:fence:call id:token
	if n, _ := fmtSscanf(val, &holds, &fence); n != 2 || holds != 1 || pttl <= 0 || len(parts) != 4 {
		return
	}
	ttl := time.Duration(now-fence)*time.Microsecond + time.Duration(pttl)*time.Millisecond
	h.mu.Lock()
	h.seen = append(h.seen, seenHolding{key: key, owner: history.TokenID(parts[3]), applied: fence*int64(time.Microsecond) - off, ttl: ttl})
	h.mu.Unlock()
}

// known records the TokenID of a holding the history names otherwise (Do's
// holdings are recorded under the caller's own name).
func (h *holdings) known(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known2(id)
}

// ttlMatch is how closely a holding's TTL, as the store's record gives it
// (PTTL in whole ms, and the time of the fence), must match an acquire's.
const ttlMatch = 3 * time.Millisecond

// annotate sets Applied on the unknown acquires that a seen holding names
// (same key and TTL, called before it was applied) when the store applied
// them after their call returned. A holding whose token the history knows
// (a granted acquire's, or Do's) names none: only a ghost's token is
// unknown to it.
func (h *holdings) annotate(ops []history.Op) []history.Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, op := range ops {
		if op.Token != "" && op.Outcome == history.Ok {
			h.known2(op.Token)
		}
	}
	var ghosts []seenHolding
	for _, s := range h.seen {
		if !h.tokens[s.owner] {
			ghosts = append(ghosts, s)
		}
	}
	for i := range ops {
		op := &ops[i]
		if op.Kind != history.Acquire || op.Outcome != history.Unknown {
			continue
		}
		for _, s := range ghosts {
			d := s.ttl - op.TTL
			if s.key == op.Key && s.applied > op.Return && op.Call < s.applied && d < ttlMatch && d > -ttlMatch {
				op.Applied = max(op.Applied, s.applied)
			}
		}
	}
	return ops
}

// known2 is known with h.mu held.
func (h *holdings) known2(id string) {
	if h.tokens == nil {
		h.tokens = map[string]bool{}
	}
	h.tokens[id] = true
}

// fmtSscanf parses a lock value's "<holds>:<fence>:" prefix.
func fmtSscanf(v string, holds, fence *int64) (int, error) {
	return fmt.Sscanf(v, "%d:%d:", holds, fence)
}

// The store's record of a holding gives when it was applied and its TTL,
// on the history's clock, closely enough to name the acquire.
func TestHoldingsReadTheStoresRecord(t *testing.T) {
	_, direct := newRedis(t)
	ctx := testCtx(t, 10*time.Second)
	var rec history.Recorder
	a := newApp(t, &rec, 1, direct, nil, nil)
	h := &holdings{direct: direct}
	ttl := 777*time.Millisecond + 123*time.Microsecond
	call := history.Now()
	l, err := a.tryLock(ctx, "held", ttl)
	if err != nil {
		t.Fatal(err)
	}
	ret := history.Now()
	time.Sleep(50 * time.Millisecond)
	h.look(ctx, "held")
	_ = a.release(ctx, l)
	if len(h.seen) != 1 {
		t.Fatalf("seen %v, want one holding", h.seen)
	}
	s := h.seen[0]
	if s.applied < call-int64(time.Millisecond) || s.applied > ret+int64(time.Millisecond) {
		t.Errorf("applied at %d, want within the call [%d, %d]", s.applied, call, ret)
	}
	if d := s.ttl - ttl; d <= -ttlMatch || d >= ttlMatch {
		t.Errorf("TTL %v, want %v ± %v", s.ttl, ttl, ttlMatch)
	}
	ghost := history.Op{Kind: history.Acquire, Key: "held", TTL: ttl, Call: call - int64(time.Second), Return: s.applied - 1, Outcome: history.Unknown}
	early := ghost
	early.Return = s.applied + 1
	ops := h.annotate([]history.Op{ghost, early})
	if ops[0].Applied != s.applied || ops[1].Applied != 0 {
		t.Errorf("annotate: late %d early %d, want %d and 0", ops[0].Applied, ops[1].Applied, s.applied)
	}
	granted := history.Op{Kind: history.Acquire, Key: "held", Token: history.TokenID(l.Token()), Outcome: history.Ok}
	ghost.Applied = 0
	if ops := h.annotate([]history.Op{granted, ghost}); ops[1].Applied != 0 {
		t.Errorf("a granted holding named the ghost: %v", ops[1])
	}
}
