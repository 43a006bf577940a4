package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/redisstore"
)

// hashTag returns the part of a Redis key that Cluster hashes: the text
// between the first '{' and the first '}' after it, if non-empty.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// FuzzKeys checks the store's key handling: accepted keys map to
// PREFIX{KEY} and PREFIX{KEY}:fence with one non-empty hash tag (one Cluster
// slot); rejected keys (dlock.ValidateKey's rules, or a leading '}' that
// would empty the tag) fail with ErrInvalid before any I/O — the client's
// dialer counts connection attempts and refuses them.
//
//	go test -run '^$' -fuzz FuzzKeys -fuzztime 30s ./redisstore
func FuzzKeys(f *testing.F) {
	for _, k := range []string{"", "k", "}", "}x", "{", "{}", "a}b", "x{y}z", "a\x00b", "\xff", "'; redis.call('FLUSHALL') --",
		strings.Repeat("k", dlock.MaxKeyLen+1)} {
		f.Add(k)
	}
	var dials atomic.Int64
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("fuzz: no I/O expected")
		}})
	defer rdb.Close()
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key string) {
		valid := dlock.ValidateKey(key) == nil && !strings.HasPrefix(key, "}")
		lock, fence := s.Keys(key)
		if lock != redisstore.DefaultPrefix+"{"+key+"}" || fence != lock+":fence" {
			t.Fatalf("Keys(%q) = %q, %q", key, lock, fence)
		}
		if valid && (hashTag(lock) != hashTag(fence) || hashTag(lock) == "" || hashTag(lock) == lock) {
			t.Fatalf("Keys(%q): tags %q and %q differ or are empty", key, hashTag(lock), hashTag(fence))
		}
		if valid {
			return
		}
		ctx := context.Background()
		_, aerr := s.Acquire(ctx, key, "tok", time.Second)
		_, eerr := s.Extend(ctx, key, "tok", time.Second)
		rerr := s.Release(ctx, key, "tok")
		_, ierr := s.Inspect(ctx, key)
		for _, err := range []error{aerr, eerr, rerr, ierr} {
			if !errors.Is(err, dlock.ErrInvalid) {
				t.Fatalf("key %q (utf8=%v): %v, want ErrInvalid", key, utf8.ValidString(key), err)
			}
		}
		if n := dials.Load(); n != 0 {
			t.Fatalf("key %q: %d connection attempts for a rejected key", key, n)
		}
	})
}
