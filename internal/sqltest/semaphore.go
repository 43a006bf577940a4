package sqltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/testkit"
)

// The permits tables' checks and benchmarks shared by the SQL stores; the
// Semaphore's rules themselves are the conformance suite's.

// PermitStore is a SQL store's locks and permits, whose fences come from
// one sequence.
type PermitStore interface {
	driver.Mutex
	driver.Semaphore
}

// PermitsRaceRound starts 8 acquirers of one permit of key (limit 2) at
// once on stores, in turn, and returns how many were admitted; an error
// other than ErrNotAcquired fails t.
func PermitsRaceRound[S driver.Semaphore](t *testing.T, stores []S, key string) int {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
		start   = make(chan struct{})
	)
	for i := range 8 {
		wg.Go(func() {
			<-start
			_, err := stores[i%len(stores)].AcquirePermits(ctx(t), key, fmt.Sprint("token-", i), 2, 1, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				granted++
			case !errors.Is(err, driver.ErrNotAcquired):
				t.Errorf("AcquirePermits: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	return granted
}

// FencesFollowTheLockSequence: permits and locks of one table prefix draw
// their fences from one sequence, so each new holding's fence, of either
// kind, is above every earlier one.
func FencesFollowTheLockSequence(t *testing.T, s PermitStore) {
	var last uint64
	for i := range 6 {
		key, token := fmt.Sprint("k", i), fmt.Sprint("token-", i)
		var fence uint64
		if i%2 == 0 {
			g, err := s.Acquire(ctx(t), key, token, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			fence = g.Fence
		} else {
			g, err := s.AcquirePermits(ctx(t), key, token, 1, 1, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			fence = g.Fence
		}
		if fence <= last {
			t.Fatalf("holding %d got fence %d after %d", i, fence, last)
		}
		last = fence
	}
}

// SemaphoreUserAPI: the user API (dlock.Semaphores) on a permits table,
// two "processes" a and b (each a pool, a store and a Semaphores, made by
// the caller with the backoff it checks): a takes 2 permits of 2; b's
// TryAcquire with a limit that is not the key's is ErrInvalid with the
// store's LimitMismatchError, at once; b's Acquire of one permit, once it
// has failed twice, gets in within 10 s of a's release (woken names how:
// the caller's backoff decides whether that proves a notification or
// pacing).
func SemaphoreUserAPI(t *testing.T, a, b *dlock.Semaphores, woken string) {
	held, err := a.Acquire(ctx(t), "sem", 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire(ctx(t), "sem", 3, 1)
	var lm *driver.LimitMismatchError
	if !errors.Is(err, dlock.ErrInvalid) || !errors.As(err, &lm) {
		t.Fatalf("TryAcquire with another limit: %v, want ErrInvalid and LimitMismatchError", err)
	}
	got, retried := make(chan struct{}), make(chan struct{})
	onRetry := dlock.WithOnRetry(func(failures int, _ error) {
		if failures == 2 {
			close(retried)
		}
	})
	go func() {
		defer close(got)
		p, err := b.Acquire(ctx(t), "sem", 2, 1, onRetry)
		if err != nil {
			t.Error(err)
			return
		}
		if err := p.Release(ctx(t)); err != nil {
			t.Error(err)
		}
	}()
	testkit.Closed(t, retried, 10*time.Second, "the waiter's second failed attempt")
	if err := held.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	testkit.Closed(t, got, 10*time.Second, woken)
}

// BenchDelay is the latency the proxy adds to every request (each chunk
// the client sends) in BenchPermitsCycle: time per cycle divided by it
// estimates the round trips per cycle (the server's own time is well
// under it).
const BenchDelay = 25 * time.Millisecond

// BenchPermitsCycle runs uncontended cycles on one key of the server at
// addr: the mutex's (Acquire + Release) and the Semaphore's
// (AcquirePermits + ReleasePermits, one permit of 8), direct (read the
// ratio, not the absolute time), then through a proxy that delays every
// request by BenchDelay, where it reports round trips per cycle
// (roundtrips/op). open opens a store on a server address (the server's
// or the proxy's), all on one table prefix.
func BenchPermitsCycle(b *testing.B, addr string, open func(b *testing.B, addr string) PermitStore) {
	cycles := map[string]func(s PermitStore, ctx context.Context) error{
		"Mutex": func(s PermitStore, ctx context.Context) error {
			if _, err := s.Acquire(ctx, "bench", "tok", time.Minute); err != nil {
				return err
			}
			return s.Release(ctx, "bench", "tok")
		},
		"Semaphore": func(s PermitStore, ctx context.Context) error {
			if _, err := s.AcquirePermits(ctx, "bench", "tok", 8, 1, time.Minute); err != nil {
				return err
			}
			return s.ReleasePermits(ctx, "bench", "tok")
		},
	}
	for _, delayed := range []bool{false, true} {
		for _, name := range []string{"Mutex", "Semaphore"} {
			sub := name
			if delayed {
				sub += "/rtt=25ms"
			}
			b.Run(sub, func(b *testing.B) {
				to := addr
				if delayed {
					p, err := faultproxy.New(addr)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = p.Close() })
					p.SetDelay(faultproxy.Upstream, BenchDelay)
					to = p.Addr()
				}
				s := open(b, to)
				ctx := context.Background()
				if err := cycles[name](s, ctx); err != nil { // prepares the statements
					b.Fatal(err)
				}
				start := time.Now()
				n := 0
				for b.Loop() {
					if err := cycles[name](s, ctx); err != nil {
						b.Fatal(err)
					}
					n++
				}
				if delayed {
					b.ReportMetric(float64(time.Since(start))/float64(n)/float64(BenchDelay), "roundtrips/op")
				}
			})
		}
	}
}
