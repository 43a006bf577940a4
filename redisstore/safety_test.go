package redisstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
)

// critical is one way to guard a critical section: the real lock, or none
// (the negative control).
type critical func(ctx context.Context, fn func()) error

// overlaps runs workers×rounds critical sections over clients independent
// go-redis clients and counts how often two were inside at once.
func overlaps(t *testing.T, guards []critical, workers, rounds int, seed uint64) (overlap, done int64) {
	t.Helper()
	var inside, over, ok atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		guard := guards[w%len(guards)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				err := guard(context.Background(), func() {
					if inside.Add(1) != 1 {
						over.Add(1)
					}
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond) // widen the window
					inside.Add(-1)
					ok.Add(1)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("critical section: %v", err)
	}
	return over.Load(), ok.Load()
}

func TestMutualExclusionAcrossIndependentClients(t *testing.T) {
	srv, _ := newRedis(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	var guards []critical
	for i := 0; i < 4; i++ { // four clients, each with its own connection pool
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		c := newClient(t, rdb)
		guards = append(guards, func(ctx context.Context, fn func()) error {
			return c.Do(ctx, "exclusive", func(context.Context) error { fn(); return nil })
		})
	}
	over, done := overlaps(t, guards, 16, 25, seed)
	if over != 0 || done != 16*25 {
		t.Fatalf("%d overlaps in %d critical sections (seed %d)", over, done, seed)
	}

	// Negative control: the same workload with no lock must be caught.
	none := []critical{func(_ context.Context, fn func()) error { fn(); return nil }}
	if over, _ := overlaps(t, none, 16, 25, seed); over == 0 {
		t.Fatalf("the overlap detector saw nothing without a lock (seed %d): it proves nothing", seed)
	}
}

func TestHolderThatNeverReleasesFreesAtTTL(t *testing.T) {
	_, rdb := newRedis(t)
	c := newClient(t, rdb)
	const ttl = 200 * time.Millisecond
	start := time.Now()
	if _, err := c.Lock(testCtx(t), "abandoned", dlock.WithTTL(ttl)); err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(testCtx(t), "abandoned", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if el := time.Since(start); el < ttl-5*time.Millisecond || el > ttl+300*time.Millisecond {
		t.Fatalf("second owner acquired after %v, want about %v", el, ttl)
	}
}

func TestReleaseWakesWaiterWithinMilliseconds(t *testing.T) {
	_, rdb := newRedis(t)
	holder := newClient(t, rdb)
	waiter := newClient(t, rdb)
	ctx := testCtx(t)
	l, err := holder.Lock(ctx, "wake", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var releasedAt atomic.Int64
	got := make(chan error, 1)
	go func() {
		l2, err := waiter.Lock(ctx, "wake")
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	// Wait until the waiter is parked on the release channel.
	deadline := time.Now().Add(5 * time.Second)
	for n := int64(0); n == 0 && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		m, _ := rdb.PubSubNumSub(ctx, "dlock:{wake}:released").Result()
		n = m["dlock:{wake}:released"]
	}
	releasedAt.Store(time.Now().UnixNano())
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(time.Now().UnixNano() - releasedAt.Load()); d > 100*time.Millisecond {
		t.Fatalf("waiter took %v after release; with a one-minute lease it must have been woken, not polling", d)
	}
}

func TestServerKilledFiresLostBeforeValidityEnds(t *testing.T) {
	srv, rdb := newRedis(t)
	c := newClient(t, rdb)
	const lease = 300 * time.Millisecond
	l, err := c.Lock(testCtx(t), "killed", dlock.WithAutoRenew(lease))
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	validUntil := l.ValidUntil()
	select {
	case <-l.Done():
	case <-time.After(2 * lease):
		t.Fatal("no lost signal after the server died")
	}
	// The signal is due at ValidUntil on the local clock; the slack is for
	// the goroutine's scheduling on a loaded machine (seen: 25 ms on two
	// cores shared with other test binaries). A lock that waits for its
	// next renewal instead is late by a third of the lease or more.
	if late := time.Since(validUntil); late > 80*time.Millisecond {
		t.Fatalf("lost signal %v after the validity ended", late)
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Err = %v, want ErrLost after ErrUnavailable", err)
	}
	err = l.Release(context.Background())
	if !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Release after loss = %v", err)
	}
}

func TestUnreachableStoreIsTyped(t *testing.T) {
	srv, rdb := newRedis(t)
	c := newClient(t, rdb)
	srv.Kill()
	_, err := c.TryLock(testCtx(t), "down")
	if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock on a dead server = %v, want ErrUnavailable and ErrNotAcquired", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err = c.Lock(ctx, "down")
	if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a dead server = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
}
