package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// BenchmarkFairVsDefault compares the fair store with the default one:
// uncontended (one goroutine, its own key) and one key contended by 16
// goroutines spread over 4 Clients (processes, each with its own go-redis
// client and store), where the default store hands the key over locally
// and the fair one serves the processes in queue order:
//
//	go test -run '^$' -bench FairVsDefault -benchtime 3s ./redisstore
func BenchmarkFairVsDefault(b *testing.B) {
	srv := redisserver.Start(b)
	ctx := context.Background()
	for _, mode := range []string{"Default", "Fair"} {
		b.Run(mode+"/uncontended/g=1", func(b *testing.B) {
			c := benchClients(b, srv, mode, 1)[0]
			runParallel(b, 1, func(key string) error { return dlockCycle(ctx, c, key) })
		})
		b.Run(mode+"/onekey/g=16,clients=4", func(b *testing.B) {
			cs := benchClients(b, srv, mode, 4)
			var i atomic.Int64
			runParallel(b, 16, func(string) error {
				return dlockCycle(ctx, cs[i.Add(1)%int64(len(cs))], "bench-fair-one")
			})
		})
	}
}

// benchClients returns n Clients of srv, each on its own go-redis client
// and store (fair or default).
func benchClients(b *testing.B, srv *redisserver.Server, mode string, n int) []*dlock.Client {
	b.Helper()
	out := make([]*dlock.Client, n)
	for i := range out {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32, ClientName: "bench" + strconv.Itoa(i)})
		b.Cleanup(func() { _ = rdb.Close() })
		var (
			st  driver.Mutex
			err error
		)
		if mode == "Fair" {
			st, err = redisstore.NewFair(rdb, nil)
		} else {
			st, err = redisstore.New(rdb, nil)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.(interface{ Close() error }).Close() })
		if out[i], err = dlock.New(st); err != nil {
			b.Fatal(err)
		}
		faulttest.CloseOnCleanup(b, out[i])
	}
	return out
}
