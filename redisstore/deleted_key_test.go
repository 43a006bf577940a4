package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
)

// A lock whose key was deleted on the server (DEL) is lost as "key gone",
// not "lease expired", still matching ErrExpired; one line, one "dlock:"
// prefix. (Was the root package's TestA6DeletedKeyIsKeyGone, review item
// A6; the root's TestDeletedKeyIsKeyGone deletes the key behind the
// Client's back on memstore.)
func TestDeletedKeyIsKeyGone(t *testing.T) {
	e := startRedis(t, false)
	c := redisClient(t, e.addr())
	l := clienttest.MustLock(t, c, testkit.Ctx(t), "A6", dlock.WithAutoRenew(300*time.Millisecond))
	lockKey, _ := e.direct.Keys("A6")
	if _, err := e.srv.Do("DEL", lockKey); err != nil {
		t.Fatal(err)
	}
	testkit.Closed(t, l.Done(), 2*time.Second, "loss after the key was deleted")
	err := l.Err()
	if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) ||
		!strings.Contains(err.Error(), "key gone") || strings.Contains(err.Error(), "lease expired") {
		t.Fatalf("Err after DEL = %v; want ErrLost and ErrExpired, saying the key is gone", err)
	}
	if s := err.Error(); strings.Contains(s, "\n") || strings.Count(s, "dlock:") > 1 {
		t.Fatalf("%q: want one line with at most one \"dlock:\" prefix", s)
	}
}
