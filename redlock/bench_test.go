package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
	"example.com/dlock/redlock"
)

// BenchmarkAcquireRelease compares one Acquire+Release through a Redlock
// store over 5 independent servers with the single-Redis store, in one run:
//
//	go test -run '^$' -bench AcquireRelease -benchtime 2000x ./redlock/
//
// "loopback" talks to the servers directly: on loopback a round trip is
// mostly CPU (5 servers and the client share the machine's cores), so this
// measures the CPU cost of asking five servers. "rtt1ms" puts every server
// behind an in-test proxy adding 0.5 ms per direction, as a network would:
// there the parallel fan-out makes Redlock cost about the round trips of
// one node (grant and release, as the single store: the fence raise rides
// on the release), not five times as many.
func BenchmarkAcquireRelease(b *testing.B) {
	c := startCluster(b, 5)
	for _, net := range []string{"loopback", "rtt1ms"} {
		var clients []redis.UniversalClient
		for _, srv := range c.servers {
			addr := srv.Addr()
			if net == "rtt1ms" {
				p := startProxy(b, addr)
				p.SetLatency(500 * time.Microsecond)
				addr = p.Addr()
			}
			clients = append(clients, newRedisClient(b, addr))
		}
		single, err := redisstore.New(clients[0], &redisstore.Options{Prefix: "single:"})
		if err != nil {
			b.Fatal(err)
		}
		rl, err := redlock.NewRedis(clients, "", &redlock.Options{NodeTimeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rl.Close() })
		nofence, err := redlock.NewRedis(clients, "nofence:", &redlock.Options{NodeTimeout: time.Second, DisableFencing: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = nofence.Close() })
		for _, bc := range []struct {
			name string
			s    driver.Mutex
		}{{"single", single}, {"redlock5", rl}, {"redlock5-nofence", nofence}} {
			b.Run(net+"/"+bc.name, func(b *testing.B) { benchAcquireRelease(b, bc.s) })
		}
	}
}

func benchAcquireRelease(b *testing.B, s driver.Mutex) {
	ctx := context.Background()
	tok := newToken()
	for b.Loop() {
		if _, err := s.Acquire(ctx, "bench", tok, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, "bench", tok); err != nil {
			b.Fatal(err)
		}
	}
}
