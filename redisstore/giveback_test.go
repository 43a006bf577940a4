package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
)

// TestReleaseWithEndedContextGivesKeyBack (issue 23, "Locks that stay
// held after they were given back"): Lease.Release with a context that
// already ended (a request context under defer) returns ErrUnavailable
// with the context's error, and the Client gives the key back in the
// background: another Client, on a redis client of its own (as another
// process), takes it within faulttest.GiveBackBound, though the lease was
// taken for 30 s. Negative control: on the code before the background
// give-back (835c212) the key stays held until its TTL, and the test fails
// with it still held at the end of the watch (faulttest.GiveBackWatch).
func TestReleaseWithEndedContextGivesKeyBack(t *testing.T) {
	srv, rdb := newRedis(t)
	ordb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = ordb.Close() })
	holder, other := newClient(t, rdb), newClient(t, ordb)
	faulttest.ReleaseEnded(t, testCtx(t), holder, other, "k", faulttest.GiveBackBound, dlock.WithTTL(30*time.Second))
}

// TestCloseWaitsForGiveBack: Close right after a Release with an ended
// context (a 30 s lease) waits for the background give-back: once Close
// returned, another client's first TryLock takes the key.
func TestCloseWaitsForGiveBack(t *testing.T) {
	srv, rdb := newRedis(t)
	ordb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = ordb.Close() })
	holder, other := newClient(t, rdb), newClient(t, ordb)
	faulttest.ReleaseEndedThenClose(t, testCtx(t), holder, other, "k", dlock.WithTTL(30*time.Second))
}
