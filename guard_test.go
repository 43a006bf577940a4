package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// Tests of dlock.Guard on memstore, in synctest bubbles (the store's clock
// is the bubble's). The store's own rules are the conformance suite's
// (drivertest, Idempotency).

// idemFault is a driver.Idempotency whose ExtendRecord fails (no answer)
// while failExt is set, and which counts calls.
type idemFault struct {
	driver.Idempotency
	failExt atomic.Bool
	calls   atomic.Int32
}

func (f *idemFault) BeginRecord(ctx context.Context, id driver.RecordID, tok, fp string, lease, keep time.Duration) (driver.RecordBegin, error) {
	f.calls.Add(1)
	return f.Idempotency.BeginRecord(ctx, id, tok, fp, lease, keep)
}

func (f *idemFault) ExtendRecord(ctx context.Context, id driver.RecordID, tok string, fence uint64, lease time.Duration) error {
	f.calls.Add(1)
	if f.failExt.Load() {
		return errors.New("no answer")
	}
	return f.Idempotency.ExtendRecord(ctx, id, tok, fence, lease)
}

func newGuard(t *testing.T, store driver.Idempotency, opts ...dlock.Option) *dlock.Guard {
	t.Helper()
	g, err := dlock.NewGuard(store, time.Hour, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// counter is a function for Do that counts its runs and answers its
// argument.
func counter(n *atomic.Int32, answer string) func(context.Context, dlock.Execution) ([]byte, error) {
	return func(context.Context, dlock.Execution) ([]byte, error) {
		n.Add(1)
		return []byte(answer), nil
	}
}

// The first call runs fn; later calls of the key, on another Guard of the
// store too, get its result back, Replayed, without running fn; another
// fingerprint gets ErrMismatch; another scope is another request.
func TestGuardRunsOnceAndReplays(t *testing.T) {
	store := memstore.New(nil)
	a, b := newGuard(t, store), newGuard(t, store)
	var runs atomic.Int32
	ctx := context.Background()
	first, err := a.Do(ctx, "order-1", "fp", counter(&runs, "charged"))
	if err != nil || first.Replayed || string(first.Value) != "charged" {
		t.Fatalf("first Do = %+v, %v", first, err)
	}
	for _, g := range []*dlock.Guard{a, b} {
		again, err := g.Do(ctx, "order-1", "fp", counter(&runs, "twice"))
		if err != nil || !again.Replayed || string(again.Value) != "charged" || again.Fence != first.Fence {
			t.Fatalf("second Do = %+v, %v; want the first result replayed", again, err)
		}
	}
	if _, err := b.Do(ctx, "order-1", "other", counter(&runs, "x")); !errors.Is(err, dlock.ErrMismatch) || errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Do with another fingerprint: %v, want ErrMismatch (and not ErrUnavailable)", err)
	}
	if r, err := b.Scope("client-2").Do(ctx, "order-1", "other", counter(&runs, "c2")); err != nil || r.Replayed {
		t.Fatalf("Do in another scope = %+v, %v; want a run of its own", r, err)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("fn ran %d times, want 2 (once per scope)", n)
	}
}

// A call while fn runs gets ErrInFlight at once; with WithWait it waits
// and gets the result once fn completes, without running fn.
func TestGuardConcurrentCallInFlightOrWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		g := newGuard(t, store)
		waiting := newGuard(t, store, dlock.WithWait(time.Minute))
		release := make(chan struct{})
		var runs atomic.Int32
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = g.Do(context.Background(), "k", "fp", func(context.Context, dlock.Execution) ([]byte, error) {
				runs.Add(1)
				<-release
				return []byte("done"), nil
			})
		})
		synctest.Wait()
		_, err := g.Do(context.Background(), "k", "fp", counter(&runs, "x"))
		var ife *dlock.InFlightError
		if !errors.As(err, &ife) || !errors.Is(err, dlock.ErrInFlight) || ife.Remaining <= 0 {
			t.Fatalf("Do while in flight: %v, want *InFlightError with the lease left", err)
		}
		var got dlock.Result
		wg.Go(func() { got, err = waiting.Do(context.Background(), "k", "fp", counter(&runs, "x")) })
		time.Sleep(10 * time.Second) // fn runs long, renewed
		close(release)
		wg.Wait()
		if err != nil || !got.Replayed || string(got.Value) != "done" || runs.Load() != 1 {
			t.Fatalf("waiting Do = %+v, %v (fn ran %d times); want the result, fn once", got, err, runs.Load())
		}
	})
}

// fn runs longer than its lease: renewal keeps other calls out (they get
// ErrInFlight). Control: with a fixed lease (WithTTL) the same call takes
// the execution over once the lease passes, and fn runs twice.
func TestGuardRenewsTheLeaseWhileFnRuns(t *testing.T) {
	for _, renewed := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			const lease = time.Second
			opt := dlock.WithAutoRenew(lease)
			if !renewed {
				opt = dlock.WithTTL(lease)
			}
			store := memstore.New(nil)
			g := newGuard(t, store, opt)
			release := make(chan struct{})
			var runs atomic.Int32
			slow := func(context.Context, dlock.Execution) ([]byte, error) {
				runs.Add(1)
				<-release
				return []byte("slow"), nil
			}
			var wg sync.WaitGroup
			wg.Go(func() { _, _ = g.Do(context.Background(), "k", "fp", slow) })
			time.Sleep(3 * lease)
			_, err := g.Do(context.Background(), "k", "fp", counter(&runs, "second"))
			close(release)
			wg.Wait()
			switch {
			case renewed && (!errors.Is(err, dlock.ErrInFlight) || runs.Load() != 1):
				t.Fatalf("renewed: Do after 3 leases: %v, fn ran %d times; want ErrInFlight, once", err, runs.Load())
			case !renewed && (err != nil || runs.Load() != 2):
				t.Fatalf("control (fixed lease): Do after 3 leases: %v, fn ran %d times; want a takeover, twice", err, runs.Load())
			}
		})
	}
}

// An executor paused past its lease (its renewals fail) is taken over; the
// new executor's result is stored; the paused one's fn sees its ctx
// cancelled, and its result is refused (ErrLost, ErrStaleFence): replays
// give the new result. Both executions get the same DownstreamKey, and the
// takeover has a greater fence.
func TestGuardStaleExecutorCannotStoreItsResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = time.Second
		f := &idemFault{Idempotency: memstore.New(nil)}
		g := newGuard(t, f, dlock.WithAutoRenew(lease))
		resume := make(chan struct{})
		var first, second dlock.Execution
		var cancelled atomic.Bool
		var staleErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			_, staleErr = g.Do(context.Background(), "pay", "fp", func(ctx context.Context, e dlock.Execution) ([]byte, error) {
				first = e
				<-resume // paused: a GC pause, a stopped VM
				cancelled.Store(ctx.Err() != nil)
				return []byte("stale"), nil
			})
		})
		synctest.Wait()
		f.failExt.Store(true)
		time.Sleep(2 * lease)
		r, err := g.Do(context.Background(), "pay", "fp", func(_ context.Context, e dlock.Execution) ([]byte, error) {
			second = e
			return []byte("fresh"), nil
		})
		if err != nil || r.Replayed || !second.TookOver || second.Fence <= first.Fence {
			t.Fatalf("takeover Do = %+v, %v, execution %+v after %+v; want a run that took over with a greater fence", r, err, second, first)
		}
		close(resume)
		wg.Wait()
		if !errors.Is(staleErr, dlock.ErrLost) || !errors.Is(staleErr, dlock.ErrStaleFence) || !cancelled.Load() {
			t.Fatalf("paused executor: Do = %v, fn ctx cancelled %v; want ErrLost and ErrStaleFence, cancelled", staleErr, cancelled.Load())
		}
		again, err := g.Do(context.Background(), "pay", "fp", counter(new(atomic.Int32), "x"))
		if err != nil || string(again.Value) != "fresh" {
			t.Fatalf("replay = %q, %v; want the takeover's result", again.Value, err)
		}
		if k1, k2 := first.DownstreamKey("charge"), second.DownstreamKey("charge"); k1 != k2 || len(k1) != 32 || k1 == first.DownstreamKey("refund") {
			t.Fatalf("DownstreamKey: %q then %q (refund %q); want one key per call, stable across takeovers", k1, k2, first.DownstreamKey("refund"))
		}
	})
}

// fn's error is returned and nothing is stored: a retry runs fn again. A
// panic abandons the record too. A result over the bound is returned with
// a *driver.ResultTooLargeError and not stored.
func TestGuardFailuresStoreNothing(t *testing.T) {
	g := newGuard(t, memstore.New(nil))
	ctx := context.Background()
	boom := errors.New("card declined")
	if _, err := g.Do(ctx, "k", "fp", func(context.Context, dlock.Execution) ([]byte, error) { return nil, boom }); err != boom {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = g.Do(ctx, "k", "fp", func(context.Context, dlock.Execution) ([]byte, error) { panic("bug") })
	}()
	big := make([]byte, driver.MaxResultLen+1)
	r, err := g.Do(ctx, "k", "fp", func(context.Context, dlock.Execution) ([]byte, error) { return big, nil })
	var re *driver.ResultTooLargeError
	if !errors.As(err, &re) || len(r.Value) != len(big) {
		t.Fatalf("Do of a result too large = %d bytes, %v; want it back with *ResultTooLargeError", len(r.Value), err)
	}
	var runs atomic.Int32
	if r, err := g.Do(ctx, "k", "fp", counter(&runs, "ok")); err != nil || r.Replayed || runs.Load() != 1 {
		t.Fatalf("Do after failures = %+v, %v; want a run", r, err)
	}
}

// Bad arguments fail with ErrInvalid and make no call to the store.
func TestGuardInvalidArgumentsBeforeIO(t *testing.T) {
	f := &idemFault{Idempotency: memstore.New(nil)}
	if _, err := dlock.NewGuard(nil, 0); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("NewGuard(nil): %v", err)
	}
	for _, opts := range [][]dlock.Option{{dlock.WithWait(-1)}, {dlock.WithRead("r")}, {dlock.WithTTL(time.Microsecond)}} {
		if _, err := dlock.NewGuard(f, 0, opts...); !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("NewGuard with a bad option: %v", err)
		}
	}
	if _, err := dlock.NewGuard(f, -time.Second); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("NewGuard with a negative retention: %v", err)
	}
	g := newGuard(t, f)
	fn := counter(new(atomic.Int32), "x")
	bad := []struct {
		g       *dlock.Guard
		key, fp string
	}{{g, "", "fp"}, {g, "\xff", "fp"}, {g, strings.Repeat("k", driver.MaxKeyLen+1), "fp"},
		{g, "k", strings.Repeat("f", driver.MaxFingerprintLen+1)}, {g.Scope("\xff"), "k", "fp"}}
	for _, b := range bad {
		if _, err := b.g.Do(context.Background(), b.key, b.fp, fn); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Do(%.12q, fingerprint of %d bytes) = %v, want ErrInvalid", b.key, len(b.fp), err)
		}
	}
	if _, err := g.Do(context.Background(), "k", "fp", nil); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Do with a nil fn = %v, want ErrInvalid", err)
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("%d store calls for bad arguments, want 0", n)
	}
}

// A call that waits (WithWait) for an executor that died (its renewals
// stop, its function never returns) takes the request over once the lease
// passes and runs the function itself, with a greater fence. Control: a
// call that does not wait gets ErrInFlight.
func TestGuardWaiterTakesOverADeadExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = time.Second
		f := &idemFault{Idempotency: memstore.New(nil)}
		g := newGuard(t, f, dlock.WithAutoRenew(lease))
		dead := make(chan struct{})
		var first dlock.Execution
		go func() {
			_, _ = g.Do(context.Background(), "k", "fp", func(_ context.Context, e dlock.Execution) ([]byte, error) {
				first = e
				<-dead
				return nil, errors.New("never")
			})
		}()
		synctest.Wait()
		f.failExt.Store(true) // the process is gone: nothing renews
		if _, err := g.Do(context.Background(), "k", "fp", counter(new(atomic.Int32), "x")); !errors.Is(err, dlock.ErrInFlight) {
			t.Fatalf("control: Do without waiting = %v, want ErrInFlight", err)
		}
		waiter := newGuard(t, f, dlock.WithWait(time.Minute))
		start := time.Now()
		var second dlock.Execution
		r, err := waiter.Do(context.Background(), "k", "fp", func(_ context.Context, e dlock.Execution) ([]byte, error) {
			second = e
			return []byte("taken over"), nil
		})
		if err != nil || r.Replayed || !second.TookOver || second.Fence <= first.Fence || time.Since(start) > 2*lease {
			t.Fatalf("waiting Do = %+v, %v after %v (execution %+v); want a takeover within the lease", r, err, time.Since(start), second)
		}
		close(dead)
	})
}

// beginLost is an idemFault whose first n BeginRecord calls are applied
// and their replies lost.
type beginLost struct {
	*idemFault
	lost atomic.Int32
}

func (f *beginLost) BeginRecord(ctx context.Context, id driver.RecordID, tok, fp string, lease, keep time.Duration) (driver.RecordBegin, error) {
	b, err := f.idemFault.BeginRecord(ctx, id, tok, fp, lease, keep)
	if err == nil && f.lost.Add(-1) >= 0 {
		return driver.RecordBegin{}, errors.New("reply lost")
	}
	return b, err
}

// A begin whose reply is lost is resent with the same token: fn runs once
// and its result is stored. Control: with more replies lost than Do
// resends, Do fails with ErrUnavailable, fn never runs, and the record the
// lost begin made blocks the key (ErrInFlight) for its lease.
func TestGuardResendsABeginWhoseReplyWasLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &beginLost{idemFault: &idemFault{Idempotency: memstore.New(nil)}}
		g := newGuard(t, f)
		var runs atomic.Int32
		f.lost.Store(1)
		r, err := g.Do(context.Background(), "k", "fp", counter(&runs, "once"))
		if err != nil || r.Replayed || runs.Load() != 1 {
			t.Fatalf("Do with a lost begin reply = %+v, %v, fn ran %d times; want one run", r, err, runs.Load())
		}
		if r, err := g.Do(context.Background(), "k", "fp", counter(&runs, "x")); err != nil || !r.Replayed || string(r.Value) != "once" {
			t.Fatalf("replay = %+v, %v", r, err)
		}
		f.lost.Store(3)
		if _, err := g.Do(context.Background(), "control", "fp", counter(&runs, "x")); !errors.Is(err, dlock.ErrUnavailable) || runs.Load() != 1 {
			t.Fatalf("control: Do with every begin reply lost = %v, fn ran %d times; want ErrUnavailable, no run", err, runs.Load())
		}
		if _, err := g.Do(context.Background(), "control", "fp", counter(&runs, "x")); !errors.Is(err, dlock.ErrInFlight) {
			t.Fatalf("control: the next Do = %v, want ErrInFlight (the lost begin's record)", err)
		}
	})
}
