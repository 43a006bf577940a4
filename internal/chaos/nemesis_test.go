package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/internal/faultproxy"
)

// fault is one entry of the nemesis catalogue: it breaks something, waits
// for the fault's duration, and repairs it before returning.
type fault struct {
	name string
	run  func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration)
}

// sleepCtx waits d or until ctx ends: the fault's duration is the thing
// under test, not a synchronisation.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func pauseFor(ttl time.Duration, rng *rand.Rand) time.Duration {
	return 2*ttl + time.Duration(rng.Int64N(int64(ttl)))
}

var catalogue = []fault{
	{"pause-app", func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration) {
		p := e.apps[rng.IntN(len(e.apps))].cmd.Process
		if p.Signal(syscall.SIGSTOP) != nil {
			return // already exited
		}
		defer p.Signal(syscall.SIGCONT)
		sleepCtx(ctx, pauseFor(ttl, rng))
	}},
	{"kill-restart-server", func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration) {
		e.lock.Kill()
		if err := e.lock.RestartProcess(); err != nil {
			e.t.Errorf("nemesis: restart: %v", err)
		}
	}},
	{"pause-server", func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration) {
		from := history.Now()
		e.lock.Pause()
		sleepCtx(ctx, pauseFor(ttl, rng))
		e.lock.Resume()
		e.stalled(from, history.Now())
	}},
	{"client-pause", func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration) {
		ms := 200 + rng.IntN(400)
		from := history.Now()
		if _, err := e.lock.DoContext(ctx, "CLIENT", "PAUSE", fmt.Sprint(ms), "ALL"); err == nil {
			d := time.Duration(ms) * time.Millisecond
			e.stalled(from, history.Now()+int64(d)) // the server's pause ends by then
			sleepCtx(ctx, d)
		}
	}},
	{"latency", func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration) {
		e.proxy.SetDelay(faultproxy.Downstream, time.Duration(20+rng.IntN(150))*time.Millisecond)
		defer e.proxy.Clear()
		sleepCtx(ctx, time.Second)
	}},
	{"reset-connections", func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration) {
		e.proxy.ResetAll()
	}},
	{"hold-replies", func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration) {
		release := e.proxy.Hold(faultproxy.Downstream)
		defer release()
		sleepCtx(ctx, ttl+100*time.Millisecond)
	}},
	{"blackhole", func(ctx context.Context, e *stockEnv, rng *rand.Rand, ttl time.Duration) {
		e.proxy.Blackhole(faultproxy.Upstream, true)
		defer e.proxy.Clear()
		sleepCtx(ctx, time.Duration(200+rng.IntN(600))*time.Millisecond)
	}},
}

// stalled records that the lock server applied nothing from from to to:
// requests sent then were applied when it ended, possibly after the
// library's release of an attempt that gave up (see check.Stall).
func (e *stockEnv) stalled(from, to int64) {
	e.stalls = append(e.stalls, check.Stall{From: from, To: to})
}

// randomNemesis injects up to max faults drawn with seed from the catalogue,
// with quiet gaps of 100–400 ms, until ctx ends. The schedule is recorded
// in e.faults, each fault as name[start,end] on the history's clock (and so
// printed with the run's result), and its stalls in e.stalls.
func randomNemesis(seed uint64, ttl time.Duration, max int) func(context.Context, *stockEnv) int {
	return func(ctx context.Context, e *stockEnv) int {
		rng := rand.New(rand.NewPCG(seed, 0xfa17))
		n := 0
		for ; n < max && ctx.Err() == nil; n++ {
			sleepCtx(ctx, time.Duration(100+rng.IntN(300))*time.Millisecond)
			if ctx.Err() != nil {
				break
			}
			f := catalogue[rng.IntN(len(catalogue))]
			start := history.Now()
			f.run(ctx, e, rng, ttl)
			e.faults = append(e.faults, fmt.Sprintf("%s[%d,%d]", f.name, start, history.Now()))
		}
		return n
	}
}
