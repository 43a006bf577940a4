package chaos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/memstore"
)

// virtual is simulated time: the server's clock reads v, a client's clock
// reads v×rate. Nothing waits for real.
type virtual struct {
	mu     sync.Mutex
	v      time.Duration
	timers []*vtimer
}

type vtimer struct {
	vt      *virtual
	at      time.Duration // server time
	f       func()
	stopped bool // guarded by vt.mu
}

func (t *vtimer) Stop() bool {
	t.vt.mu.Lock()
	defer t.vt.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (vt *virtual) server() time.Time {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	return epoch.Add(vt.v)
}

// advance moves time by d and runs the client timers that came due.
func (vt *virtual) advance(d time.Duration) {
	vt.mu.Lock()
	vt.v += d
	var due []func()
	for _, t := range vt.timers {
		if !t.stopped && t.at <= vt.v {
			t.stopped = true
			due = append(due, t.f)
		}
	}
	vt.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// skewed is a client clock running at rate × the server's.
type skewed struct {
	vt   *virtual
	rate float64
}

func (c skewed) Now() time.Time {
	c.vt.mu.Lock()
	defer c.vt.mu.Unlock()
	return epoch.Add(time.Duration(float64(c.vt.v) * c.rate))
}

func (c skewed) AfterFunc(d time.Duration, f func()) dlock.Timer {
	c.vt.mu.Lock()
	defer c.vt.mu.Unlock()
	t := &vtimer{vt: c.vt, at: c.vt.v + time.Duration(float64(d)/c.rate), f: f}
	c.vt.timers = append(c.vt.timers, t)
	return t
}

// skewRun: A (clock at rate) takes a 1 s lease at server time 0; B (true
// clock) takes the lock as soon as the server lets it. It returns the
// overlaps between A's believed validity and B's grant, on server time.
func skewRun(t *testing.T, rate float64) int {
	vt := &virtual{}
	store := memstore.New(vt.server)
	ctx := context.Background()
	ttl := time.Second
	a, _ := dlock.New(store, dlock.WithClock(skewed{vt, rate}), dlock.WithTTL(ttl))
	b, _ := dlock.New(store, dlock.WithClock(skewed{vt, 1}), dlock.WithTTL(ttl))
	la, err := a.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// A's validity end, read on A's clock, converted to server time.
	aEnd := time.Duration(float64(la.ValidUntil().Sub(epoch)) / rate)
	ops := []history.Op{{Client: 1, Kind: history.Acquire, Key: "k", Token: "A", Outcome: history.Ok, Fence: la.Fence(), ValidUntil: int64(aEnd)}}
	for range 2000 { // 1 ms steps, bounded
		vt.advance(time.Millisecond)
		if lb, err := b.TryLock(ctx, "k"); err == nil {
			now := int64(vt.server().Sub(epoch))
			ops = append(ops, history.Op{Client: 2, Kind: history.Acquire, Key: "k", Token: "B", Call: now, Return: now, Outcome: history.Ok, Fence: lb.Fence(), ValidUntil: now + int64(ttl)})
			_ = lb.Release(ctx)
			break
		}
	}
	_ = la.Release(ctx)
	if len(ops) != 2 {
		t.Fatal("B never acquired")
	}
	return len(check.MutualExclusion(ops))
}

// R7 (clock skew, injected clock, no real waiting). Invariant: a client
// whose clock runs up to 1% slow or fast never believes it holds a lease
// the server already gave away (the drift margin, TTL/100 + 2 ms, covers
// it). Pass: zero overlaps at rates 0.99–1.05. Negative control: a client
// clock 3% slow is outside the margin and the overlap is detected — the
// documented clock-rate assumption.
func TestClockSkewWithinDriftIsSafe(t *testing.T) {
	for _, rate := range []float64{0.99, 0.995, 1, 1.01, 1.05} {
		if n := skewRun(t, rate); n != 0 {
			t.Errorf("client clock rate %.3f: %d overlaps", rate, n)
		}
	}
	n := skewRun(t, 0.97)
	t.Logf("RESULT clock-skew safe-rates=0.99..1.05 overlaps=0; control rate 0.97 overlaps=%d", n)
	if n == 0 {
		t.Fatal("negative control: a clock 3% slow is not detected")
	}
}
