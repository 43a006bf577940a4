package chaos_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/redisstore"
)

// hostile are keys and tokens that would do harm if they were ever
// interpolated into a script or a command instead of passed as data.
var hostile = []string{
	`x"; redis.call('FLUSHALL'); --`, `']]..redis.call('DEL','victim')..[['`, "a\x00b", "line\r\n*1\r\n$8\r\nFLUSHALL\r\n",
	"*", "?", "[a-z]", "{victim}", "a}b{c", "dlock:{victim}", "victim ", "%s%d%n", "$(rm -rf /)", "é🙂",
}

// R22. Invariant: keys and tokens reach Lua only through KEYS/ARGV and are
// used literally. Pass: every hostile key locks and unlocks exactly its own
// PREFIX{key} (plus its fence counter), a hostile token owns only what it
// acquired, another owner's lock and an unrelated key are untouched, and
// DBSIZE grows by exactly the fence counters.
func TestHostileKeysAndTokensAreData(t *testing.T) {
	srv, rdb := newRedis(t)
	ctx := testCtx(t, time.Minute)
	// A client that resends (go-redis's retries on), so that every final
	// release leaves its record, whose key holds the hostile token.
	o := clientOptions(srv.Addr())
	o.MaxRetries = 0
	resending := redis.NewClient(o)
	defer resending.Close()
	s, _ := redisstore.New(resending, nil)
	defer s.Close()
	if err := rdb.Set(ctx, "victim", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "victim", "owner-token", time.Minute); err != nil {
		t.Fatal(err)
	}
	base, _ := rdb.DBSize(ctx).Result()
	for i, key := range hostile {
		tok := hostile[len(hostile)-1-i]
		g, err := s.Acquire(ctx, key, tok, time.Minute)
		if err != nil {
			t.Fatalf("acquire %q: %v", key, err)
		}
		lock, _ := s.Keys(key)
		stored, _ := rdb.Get(ctx, lock).Result() // "<holds>:<fence>:<call id>:<owner>"
		if parts := strings.SplitN(stored, ":", 4); len(parts) != 4 || parts[0] != "1" || parts[3] != tok || g.Holds != 1 {
			t.Fatalf("key %q: stored lock %q, holds %d", key, stored, g.Holds)
		}
		// The hostile token must not release or extend the victim's lock.
		if err := s.Release(ctx, "victim", tok); !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("token %q released victim: %v", tok, err)
		}
		if err := s.Release(ctx, key, tok); err != nil {
			t.Fatalf("release %q: %v", key, err)
		}
		if i, err := s.Inspect(ctx, key); err != nil || i.Held || i.Fence != g.Fence {
			t.Fatalf("key %q after release: %+v, %v; want free, last fence %d kept", key, i, err, g.Fence)
		}
	}
	if v, _ := rdb.Get(ctx, "victim").Result(); v != "v" {
		t.Fatalf("unrelated key changed to %q", v)
	}
	if i, _ := s.Inspect(ctx, "victim"); !i.Held || i.Token != "owner-token" {
		t.Fatalf("victim's lock changed: %+v", i.Held)
	}
	// Per hostile key, within the retention: the lock's tombstone and its
	// owner's record of the release (both expire with the retention).
	if n, _ := rdb.DBSize(ctx).Result(); n != base+2*int64(len(hostile)) {
		t.Fatalf("DBSIZE %d, want %d (a tombstone and a release record per hostile key)", n, base+2*int64(len(hostile)))
	}
	t.Logf("RESULT hostile-values keys=%d dbsize-before=%d after=%d", len(hostile), base, base+2*int64(len(hostile)))
}
