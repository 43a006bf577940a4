package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// Tests of dlock.Limiter on memstore inside synctest bubbles, where the
// store's clock (time.Now) is the bubble's: times are exact.

func newLimiter(t *testing.T, s driver.RateLimiter, lim dlock.RateLimit, opts ...dlock.LimiterOption) *dlock.Limiter {
	t.Helper()
	l, err := dlock.NewLimiter(s, lim, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func allow(t *testing.T, l *dlock.Limiter, key string, n int) dlock.RateResult {
	t.Helper()
	r, err := l.AllowN(context.Background(), key, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): %v", key, n, err)
	}
	return r
}

// TestLimiterSeedTenThreadsFiveGetOne: 5 a second: of 10 goroutines asking
// at once on one key (one budget overall) exactly 5 are admitted; with a
// key per client (a budget per client) each of two clients gets its own 5.
func TestLimiterSeedTenThreadsFiveGetOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, memstore.New(nil), dlock.RateLimit{Rate: 5, Period: time.Second, Burst: 5})
		count := func(keys ...string) (n int64) {
			var got atomic.Int64
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Go(func() { got.Add(int64(allow(t, l, keys[i%len(keys)], 1).Allowed)) })
			}
			wg.Wait()
			return got.Load()
		}
		if n := count("api"); n != 5 {
			t.Fatalf("overall: %d of 10 admitted, want 5", n)
		}
		if n := count("api:alice", "api:bob"); n != 10 {
			t.Fatalf("per client: %d of 10 admitted (5 each), want 10", n)
		}
		time.Sleep(time.Second) // a second on, the rate has put 5 back
		if n := count("api"); n != 5 {
			t.Fatalf("overall, a second later: %d admitted, want 5", n)
		}
	})
}

// TestLimiterWaitsForRetryAfter: Wait returns once the request is admitted,
// exactly one interval after the burst (the bubble's clock), and charges
// it; n above the burst fails at once with ErrInvalid, charging nothing.
func TestLimiterWaitsForRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, memstore.New(nil), dlock.RateLimit{Rate: 2, Period: time.Second, Burst: 2})
		ctx := context.Background()
		allow(t, l, "k", 2)
		start := time.Now()
		if err := l.Wait(ctx, "k"); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if d := time.Since(start); d != 500*time.Millisecond {
			t.Fatalf("Wait returned after %v, want the interval, 500ms", d)
		}
		if r := allow(t, l, "k", 1); r.Allowed != 0 || r.RetryAfter != 500*time.Millisecond {
			t.Fatalf("after Wait: %+v, want denied for 500ms (Wait was charged)", r)
		}
		err := l.WaitN(ctx, "k", 3)
		var be *driver.BurstExceededError
		if !errors.Is(err, dlock.ErrInvalid) || !errors.As(err, &be) || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("WaitN(3) of a burst of 2 = %v after %v; want ErrInvalid (BurstExceededError) at once", err, time.Since(start)-500*time.Millisecond)
		}
	})
}

// TestLimiterWaitEndsWithItsContext: a wait that would pass ctx's deadline
// fails at once (ErrNotAcquired, context.DeadlineExceeded) and charges
// nothing, while one whose deadline leaves room waits; a cancelled wait
// returns ctx's error when it is cancelled.
func TestLimiterWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, memstore.New(nil), dlock.RateLimit{Rate: 1, Period: time.Second, Burst: 1})
		allow(t, l, "k", 1)
		start := time.Now()
		short, cancel := context.WithTimeout(context.Background(), 999*time.Millisecond)
		defer cancel()
		err := l.Wait(short, "k")
		if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Fatalf("Wait with 999ms for a 1s wait = %v after %v; want ErrNotAcquired and DeadlineExceeded at once", err, time.Since(start))
		}
		long, cancel2 := context.WithTimeout(context.Background(), 1001*time.Millisecond)
		defer cancel2()
		if err := l.Wait(long, "k"); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Wait with 1.001s for a 1s wait = %v after %v; want admitted after 1s (control)", err, time.Since(start))
		}
		c, stop := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, stop)
		if err := l.Wait(c, "k"); err != context.Canceled || time.Since(start) != 1300*time.Millisecond {
			t.Fatalf("cancelled Wait = %v after %v, want context.Canceled after 1.3s", err, time.Since(start))
		}
		if r := allow(t, l, "k", 1); r.Allowed != 0 || r.RetryAfter != 700*time.Millisecond {
			t.Fatalf("after the failed waits: %+v, want denied for 700ms (they charged nothing)", r)
		}
	})
}

// TestLimiterSetLimit: calls after SetLimit use the new limit on the key's
// state as it was: raising the burst admits at once what it allows; an
// invalid limit changes nothing.
func TestLimiterSetLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, memstore.New(nil), dlock.RateLimit{Rate: 1, Period: time.Second, Burst: 1})
		allow(t, l, "k", 1)
		if r := allow(t, l, "k", 1); r.Allowed != 0 {
			t.Fatalf("over a burst of 1: %+v", r)
		}
		if err := l.SetLimit(dlock.RateLimit{Rate: 1, Period: 0, Burst: 3}); !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("SetLimit(period 0) = %v, want ErrInvalid", err)
		}
		if got := l.Limit(); got.Burst != 1 || got.Period != time.Second {
			t.Fatalf("an invalid SetLimit changed the limit to %v", got)
		}
		if err := l.SetLimit(dlock.RateLimit{Rate: 1, Period: time.Second, Burst: 3}); err != nil {
			t.Fatal(err)
		}
		if r := allow(t, l, "k", 2); r.Allowed != 2 || r.Remaining != 0 {
			t.Fatalf("with the burst raised to 3, one used: %+v, want 2 admitted, 0 left", r)
		}
		if r := allow(t, l, "k", 1); r.Allowed != 0 || r.RetryAfter != time.Second {
			t.Fatalf("then: %+v, want denied for 1s", r)
		}
	})
}

// TestLimiterKeysAndArguments: a prefix keeps budgets apart; bad input is
// ErrInvalid before any I/O (a done ctx is not even looked at).
func TestLimiterKeysAndArguments(t *testing.T) {
	s := memstore.New(nil)
	lim := dlock.RateLimit{Rate: 1, Period: time.Hour, Burst: 1}
	login := newLimiter(t, s, lim, dlock.WithKeyPrefix("login:"))
	api := newLimiter(t, s, lim, dlock.WithKeyPrefix("api:"))
	if allow(t, login, "alice", 1).Allowed != 1 || allow(t, api, "alice", 1).Allowed != 1 {
		t.Fatal("limiters with other prefixes share a budget")
	}
	if allow(t, api, "alice", 1).Allowed != 0 {
		t.Fatal("a limiter's own key admitted twice within its burst of 1 (control)")
	}
	if _, err := dlock.NewLimiter(nil, lim); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("NewLimiter(nil) = %v", err)
	}
	if _, err := dlock.NewLimiter(s, dlock.RateLimit{Rate: 1, Period: time.Hour}); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("NewLimiter(burst 0) = %v", err)
	}
	if _, err := dlock.NewLimiter(storeOnly{}, lim); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("NewLimiter(a store that is no RateLimiter) = %v, want errors.ErrUnsupported", err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		key string
		n   int
	}{{"", 1}, {"k", 0}, {"k", 2}, {"\xff", 1}} {
		if _, err := api.AllowN(done, c.key, c.n); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("AllowN(%q, %d) = %v, want ErrInvalid", c.key, c.n, err)
		}
	}
	if _, err := api.Allow(done, "bob"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Allow with a done ctx = %v, want context.Canceled", err)
	}
	if allow(t, api, "bob", 1).Allowed != 1 {
		t.Fatal("the refused calls charged bob")
	}
}

// storeOnly is a store that offers no primitive: it can do no I/O.
type storeOnly struct{}

func (storeOnly) Model() driver.Model { return driver.Model{} }
