package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

func TestWaitersCountsSubscribedStores(t *testing.T) {
	srv := redisserver.Start(t)
	ctx := context.Background()
	var stores []*redisstore.Store
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		s, err := redisstore.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	if n, err := stores[0].Waiters(ctx, "w"); err != nil || n != 0 {
		t.Fatalf("Waiters before any subscription = %d, %v; want 0", n, err)
	}
	// Two waiters in one store share a connection; one in another store.
	var cancels []func()
	for _, s := range []*redisstore.Store{stores[1], stores[1], stores[2]} {
		_, cancel, err := s.Subscribe(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, cancel)
	}
	if n, err := stores[0].Waiters(ctx, "w"); err != nil || n != 2 {
		t.Fatalf("Waiters with two subscribed stores = %d, %v; want 2", n, err)
	}
	if n, err := stores[0].Waiters(ctx, "other"); err != nil || n != 0 {
		t.Fatalf("Waiters of another key = %d, %v; want 0", n, err)
	}
	for _, c := range cancels {
		c()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := stores[0].Waiters(ctx, "w")
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Waiters after cancel = %d, %v; want 0", n, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the server, not synchronising goroutines
	}
}
