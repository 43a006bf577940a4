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
	"example.com/dlock/redisstore"
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

// dialSignal reports each dial on a channel, then dials.
type dialSignal struct{ dialing chan struct{} }

func (d dialSignal) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		select {
		case d.dialing <- struct{}{}:
		default:
		}
		return next(ctx, network, addr)
	}
}
func (d dialSignal) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d dialSignal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Close does not wait for a subscription that is still opening the pub/sub
// connection: against a stopped server the kernel accepts the connection
// but nothing answers, so the opening lasts up to the client's read
// timeout. Close returns at once; the opener closes the connection when its
// attempt ends and reports ErrUnavailable.
func TestCloseDoesNotWaitForAnOpeningSubscription(t *testing.T) {
	srv, rdb := newRedis(t)
	const readTimeout = 2 * time.Second
	opening := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = opening.Close() })
	sig := dialSignal{make(chan struct{}, 1)}
	opening.AddHook(sig)
	s, err := redisstore.New(opening, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	errc := make(chan error, 1)
	go func() {
		_, cancel, err := s.Subscribe(context.Background(), "k")
		if cancel != nil {
			cancel()
		}
		errc <- err
	}()
	select {
	case <-sig.dialing:
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription did not dial")
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > readTimeout/4 {
		t.Fatalf("Close took %v: it waited for the opening subscription (read timeout %v)", took, readTimeout)
	}
	srv.Resume()
	resumed = true
	select {
	case err := <-errc:
		if !errors.Is(err, dlock.ErrUnavailable) {
			t.Fatalf("subscription opened across Close: %v, want ErrUnavailable", err)
		}
	case <-time.After(3 * readTimeout):
		t.Fatal("the opening subscription did not return")
	}
	ctx := testCtx(t)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Contains(rdb.ClientList(ctx).Val(), "sub=1") {
		if time.Now().After(deadline) {
			t.Fatalf("a pub/sub connection outlived Close: %s", rdb.ClientList(ctx).Val())
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}
