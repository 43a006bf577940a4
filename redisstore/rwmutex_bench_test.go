package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// BenchmarkRWCycle compares, at the store level on one server, a read
// cycle (AcquireRead + ReleaseRW) and a write cycle (AcquireWrite +
// ReleaseRW) with the mutex cycle (Acquire + Release) in the same run:
// read the ratio, not the absolute time.
func BenchmarkRWCycle(b *testing.B) {
	srv := redisserver.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32})
	b.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(rdb, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	for _, g := range []int{1, 16} {
		b.Run("Mutex/g="+strconv.Itoa(g), func(b *testing.B) {
			runParallel(b, g, func(key string) error {
				tok := floorToken()
				if _, err := st.Acquire(ctx, key, tok, 30*time.Second); err != nil {
					return err
				}
				return st.Release(ctx, key, tok)
			})
		})
		b.Run("Read/g="+strconv.Itoa(g), func(b *testing.B) {
			runParallel(b, g, func(key string) error {
				tok := floorToken()
				if _, err := st.AcquireRead(ctx, key, tok, 30*time.Second); err != nil {
					return err
				}
				return st.ReleaseRW(ctx, key, tok)
			})
		})
		b.Run("Write/g="+strconv.Itoa(g), func(b *testing.B) {
			runParallel(b, g, func(key string) error {
				tok := floorToken()
				if _, err := st.AcquireWrite(ctx, key, tok, 30*time.Second); err != nil {
					return err
				}
				return st.ReleaseRW(ctx, key, tok)
			})
		})
	}
}
