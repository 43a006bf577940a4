package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
)

// dials counts the connections a client opens.
type dials struct{ n atomic.Int64 }

func (d *dials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}
func (d *dials) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d *dials) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The pub/sub connection outlives its last waiter for a moment, so a key
// contended back and forth does not dial per turn, and then closes, so an
// idle store holds no connection.
func TestSubscriptionConnectionLingersThenCloses(t *testing.T) {
	srv, rdb := newRedis(t)
	counted := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = counted.Close() })
	d := &dials{}
	counted.AddHook(d)
	s := newStore(t, counted)
	ctx := testCtx(t)
	// The pub/sub connection, once its channels are gone, is the one whose
	// last command was UNSUBSCRIBE.
	pubsubClients := func() int {
		return strings.Count(rdb.ClientList(ctx).Val(), "cmd=unsubscribe")
	}
	_, cancel, err := s.Subscribe(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	before := d.n.Load()
	_, cancel, err = s.Subscribe(ctx, "b") // right after: the connection is reused
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if n := d.n.Load() - before; n != 0 {
		t.Fatalf("re-subscribing right after the last waiter left dialled %d connections, want 0", n)
	}
	if n := rdb.PubSubNumSub(ctx, "dlock:{a}:released", "dlock:{b}:released").Val(); n["dlock:{a}:released"]+n["dlock:{b}:released"] != 0 {
		t.Fatalf("channels still subscribed without waiters: %v", n)
	}
	if n := pubsubClients(); n != 1 {
		t.Fatalf("%d idle pub/sub connections right after the last waiter left, want 1 (lingering)", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for pubsubClients() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pub/sub connection still open 5 s after the last waiter left (linger is 1 s)")
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// After Close the store opens no new pub/sub connection: a late Subscribe
// fails with ErrUnavailable (its waiter wakes at the holder's expiry), so
// nothing outlives the store.
func TestSubscribeAfterCloseOpensNothing(t *testing.T) {
	srv, _ := newRedis(t)
	counted := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = counted.Close() })
	d := &dials{}
	counted.AddHook(d)
	s := newStore(t, counted)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Subscribe(testCtx(t), "k"); !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Subscribe after Close = %v, want ErrUnavailable", err)
	}
	if n := d.n.Load(); n != 0 {
		t.Fatalf("Subscribe after Close dialled %d connections", n)
	}
}
