package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// The benchmarks compare the library with a hand-written floor: go-redis
// SET NX PX to take the lock and an EVALSHA compare-and-delete to free it,
// two round trips and nothing else (no fencing, no renewal, no re-entry).
// Compare the ns/op of a Dlock benchmark with its Floor twin:
//
//	go test -run '^$' -bench . -benchmem ./redisstore
//
// Uncontended: 1 and 16 goroutines, each on its own key. Contended: 16
// goroutines on one key; the floor there serialises its goroutines on an
// in-process mutex in front of the Redis lock (the best a hand-written client
// can do without a cross-process wake-up).

var floorDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

type benchEnv struct {
	rdb *redis.Client
	c   *dlock.Client
}

func newBenchEnv(b *testing.B) benchEnv {
	b.Helper()
	srv := redisserver.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := floorDelete.Load(context.Background(), rdb).Err(); err != nil {
		b.Fatal(err)
	}
	st, err := redisstore.New(rdb, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	c, err := dlock.New(st)
	if err != nil {
		b.Fatal(err)
	}
	faulttest.CloseOnCleanup(b, c)
	return benchEnv{rdb: rdb, c: c}
}

func floorToken() string {
	var t [16]byte
	_, _ = rand.Read(t[:])
	return hex.EncodeToString(t[:])
}

// floorCycle is one hand-written lock+unlock: it reports whether the lock was
// taken (and so released).
func floorCycle(ctx context.Context, rdb *redis.Client, key string) (bool, error) {
	tok := floorToken()
	ok, err := rdb.SetNX(ctx, key, tok, 30*time.Second).Result()
	if err != nil || !ok {
		return false, err
	}
	return true, floorDelete.EvalSha(ctx, rdb, []string{key}, tok).Err()
}

func dlockCycle(ctx context.Context, c *dlock.Client, key string) error {
	l, err := c.Lock(ctx, key)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

// runParallel runs body on g goroutines, each with its own key, for b.N
// cycles in total.
func runParallel(b *testing.B, g int, body func(key string) error) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, g)
	b.ResetTimer()
	for i := range g {
		key := "bench-" + strconv.Itoa(i) + "-" + b.Name()
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := body(key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func BenchmarkUncontended(b *testing.B) {
	env := newBenchEnv(b)
	ctx := context.Background()
	for _, g := range []int{1, 16} {
		b.Run("Floor/g="+strconv.Itoa(g), func(b *testing.B) {
			runParallel(b, g, func(key string) error {
				_, err := floorCycle(ctx, env.rdb, key)
				return err
			})
		})
		b.Run("Dlock/g="+strconv.Itoa(g), func(b *testing.B) {
			runParallel(b, g, func(key string) error { return dlockCycle(ctx, env.c, key) })
		})
	}
}

func BenchmarkContendedOneKey(b *testing.B) {
	env := newBenchEnv(b)
	ctx := context.Background()
	const g = 16
	b.Run("Floor/g=16", func(b *testing.B) {
		var mu sync.Mutex
		runParallel(b, g, func(string) error {
			mu.Lock()
			defer mu.Unlock()
			for {
				ok, err := floorCycle(ctx, env.rdb, "bench-one")
				if err != nil || ok {
					return err
				}
			}
		})
	})
	b.Run("Dlock/g=16", func(b *testing.B) {
		runParallel(b, g, func(string) error { return dlockCycle(ctx, env.c, "bench-one") })
	})
}

// BenchmarkContendedOneKeyRMW is the read-modify-write section of issue 5's
// goal 2 (lock → GET → SET → unlock, 16 goroutines on one key): the floor,
// dlock, dlock with WithRead folding the GET into the grant, and dlock with
// WithRead and Lease.Commit folding the SET into the release too.
func BenchmarkContendedOneKeyRMW(b *testing.B) {
	env := newBenchEnv(b)
	ctx := context.Background()
	const g, data = 16, "bench-rmw-data"
	incr := func(v int64) error { return env.rdb.Set(ctx, data, v+1, 0).Err() }
	get := func() (int64, error) {
		v, err := env.rdb.Get(ctx, data).Int64()
		if err == redis.Nil {
			err = nil
		}
		return v, err
	}
	b.Run("Floor/g=16", func(b *testing.B) {
		var mu sync.Mutex
		runParallel(b, g, func(string) error {
			mu.Lock()
			defer mu.Unlock()
			tok := floorToken()
			for {
				ok, err := env.rdb.SetNX(ctx, "bench-rmw-floor", tok, 30*time.Second).Result()
				if err != nil {
					return err
				}
				if ok {
					break
				}
			}
			v, err := get()
			if err == nil {
				err = incr(v)
			}
			if err != nil {
				return err
			}
			return floorDelete.EvalSha(ctx, env.rdb, []string{"bench-rmw-floor"}, tok).Err()
		})
	})
	b.Run("Dlock/g=16", func(b *testing.B) {
		runParallel(b, g, func(string) error {
			l, err := env.c.Lock(ctx, "bench-rmw")
			if err != nil {
				return err
			}
			v, err := get()
			if err == nil {
				err = incr(v)
			}
			if err != nil {
				return err
			}
			return l.Release(ctx)
		})
	})
	// lockRead takes the lock with the data read in the grant.
	lockRead := func() (*dlock.Lease, int64, error) {
		l, err := env.c.Lock(ctx, "bench-rmw", dlock.WithRead(data))
		if err != nil {
			return nil, 0, err
		}
		s, _ := l.Value()
		v, _ := strconv.ParseInt(s, 10, 64)
		return l, v, nil
	}
	b.Run("DlockWithRead/g=16", func(b *testing.B) {
		runParallel(b, g, func(string) error {
			l, v, err := lockRead()
			if err != nil {
				return err
			}
			if err := incr(v); err != nil {
				return err
			}
			return l.Release(ctx)
		})
	})
	b.Run("DlockCommit/g=16", func(b *testing.B) {
		runParallel(b, g, func(string) error {
			l, v, err := lockRead()
			if err != nil {
				return err
			}
			return l.Commit(ctx, strconv.FormatInt(v+1, 10))
		})
	})
}
