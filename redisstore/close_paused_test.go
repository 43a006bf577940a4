package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
)

// Close is bounded by its context when the store does not answer: it
// returns about then, with an error, and the leases have ended locally.
// (Was the root package's TestA3CloseIsBoundedByItsContext, review item A3.)
func TestCloseIsBoundedByItsContext(t *testing.T) {
	e := startRedis(t, false)
	c := redisClient(t, e.addr())
	l := clienttest.MustLock(t, c, testkit.Ctx(t), "a3-paused", dlock.WithTTL(10*time.Second))
	e.srv.Pause()
	defer e.srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Close(ctx)
	el := time.Since(start)
	if err == nil || el > 2*time.Second {
		t.Fatalf("Close on a paused server = %v after %v, want an error within about 200ms", err, el)
	}
	if !errors.Is(l.Err(), dlock.ErrLost) {
		t.Fatalf("lease after Close = %v, want ended", l.Err())
	}
}
