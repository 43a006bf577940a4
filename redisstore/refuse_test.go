package redisstore_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
)

// TestL6RefusalsEndTheWaitAtOnce: errors that retrying cannot fix come back
// as errors matching dlock.ErrRefused that name the key, and Lock ends its
// wait at once with them (issue 13, L6: an ACL user lacking EVALSHA made
// `dlock run` retry 3,283 rejected calls). Each case is a real server
// refusal: an ACL user lacking EVALSHA and EVAL, one lacking TIME (used
// inside the scripts), one lacking the lock's keys, a wrong password, and
// no password where one is required. Negative control: a connection
// refused (nothing listens) stays unclassified and is retried.
func TestL6RefusalsEndTheWaitAtOnce(t *testing.T) {
	srv, admin := newRedis(t)
	ctx := testCtx(t)
	users := map[string][]string{
		"noeval":  {"~*", "&*", "+@all", "-evalsha", "-eval"},
		"notime":  {"~*", "&*", "+@all", "-time"},
		"nokeys":  {"~other:*", "&*", "+@all"},
		"allowed": {"~*", "&*", "+@all"}, // the control: it can lock
	}
	for u, rules := range users {
		args := append([]any{"ACL", "SETUSER", u, "on", ">pw"}, toAny(rules)...)
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lockAs := func(name string, o *redis.Options) (error, int) {
		t.Helper()
		rdb := redis.NewClient(o)
		t.Cleanup(func() { _ = rdb.Close() })
		failures := 0
		c, err := dlock.New(newStore(t, rdb), dlock.WithOnRetry(func(int, error) { failures++ }))
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, c)
		l, err := c.Lock(ctx, "refused-"+name, dlock.WithWait(2*time.Second))
		if err == nil {
			err = l.Release(ctx)
		}
		return err, failures
	}
	opts := func(user, pw string) *redis.Options {
		return &redis.Options{Addr: srv.Addr(), Username: user, Password: pw, MaxRetries: -1}
	}
	cases := []struct {
		name string
		o    *redis.Options
	}{
		{"noeval", opts("noeval", "pw")}, {"notime", opts("notime", "pw")}, {"nokeys", opts("nokeys", "pw")},
		{"wrongpass", opts("allowed", "not-pw")},
	}
	for _, tc := range cases {
		start := time.Now()
		err, failures := lockAs(tc.name, tc.o)
		if !errors.Is(err, dlock.ErrRefused) || !errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), `"refused-`+tc.name+`"`) {
			t.Errorf("%s: Lock = %v, want ErrRefused and ErrNotAcquired naming the key", tc.name, err)
		}
		if el := time.Since(start); failures != 0 || el > time.Second {
			t.Errorf("%s: %d retries in %v before the refusal, want none", tc.name, failures, el)
		}
	}
	if err, _ := lockAs("allowed", opts("allowed", "pw")); err != nil {
		t.Fatalf("control: the allowed user: %v", err)
	}
	// No password where one is required (NOAUTH), last: it locks the
	// server for the users above.
	if err := admin.ConfigSet(ctx, "requirepass", "pw").Err(); err != nil {
		t.Fatal(err)
	}
	if err, failures := lockAs("noauth", &redis.Options{Addr: srv.Addr(), MaxRetries: -1}); !errors.Is(err, dlock.ErrRefused) || failures != 0 {
		t.Errorf("noauth: Lock = %v after %d retries, want ErrRefused at once", err, failures)
	}

	// Negative control: nothing listening is transient, not a refusal.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	_, err = newStore(t, rdb).Acquire(ctx, "k", "t", time.Second)
	if err == nil || errors.Is(err, dlock.ErrRefused) {
		t.Fatalf("connection refused: %v, want an unclassified error", err)
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
