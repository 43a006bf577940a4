package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/internal/idemtest"
	"example.com/dlock/redisstore"
)

// redisFaults is one Redis server as idemtest.LostReplies sees it: Guard
// i's store is its own go-redis client, reads bounded at 150 ms, without
// go-redis retries for Guards 0 and 1 (so that the Guard's own resend of a
// begin is what answers a lost reply) and with 2 for Guard 2.
func redisFaults(t *testing.T) idemtest.FaultStore {
	srv, _ := newRedis(t)
	return idemtest.FaultStore{Addr: srv.Addr(), Open: func(t testing.TB, addr string, i int) driver.Idempotency {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: []int{-1, -1, 2}[i],
			DialTimeout: time.Second, ReadTimeout: 150 * time.Millisecond, WriteTimeout: 150 * time.Millisecond})
		s, err := redisstore.New(rdb, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() }) // last in, first out: the store closes first
		t.Cleanup(func() { _ = s.Close() })
		return s
	}}
}

// TestGuardLostRepliesNeverRunTwice: idemtest.LostReplies on one Redis
// server behind the fault proxy: lost, late and reset replies never run a
// key twice at once, never run a completed key again, never replay a wrong
// value. Control: TestGuardLostRepliesControlStartsOnSilence.
func TestGuardLostRepliesNeverRunTwice(t *testing.T) {
	idemtest.LostReplies(t, redisFaults(t))
}

// TestGuardLostRepliesControlStartsOnSilence (idemtest.LostRepliesControl):
// a store client that takes a begin without an answer for a start must
// show a violation.
func TestGuardLostRepliesControlStartsOnSilence(t *testing.T) {
	idemtest.LostRepliesControl(t, redisFaults(t))
}
