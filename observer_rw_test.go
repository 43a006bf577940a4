package dlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// rwEvent is the event typ of a holding of key (nil: none yet) in kind.
func rwEvent(typ dlock.EventType, kind dlock.Kind, key string, h *dlock.RWHolding) dlock.Event {
	e := dlock.Event{Type: typ, Kind: kind, Key: key}
	if h != nil {
		e.Fence, e.Count = h.Fence(), 1
	}
	return e
}

// A read-write holding's life, as a lease's, with kind "write" or "read"
// (the mode, read once Downgrade was called) and Count 1: the wait, a try
// that meets the writer, a wait that runs out, a renewal, Downgrade (no
// event of its own), the release; then a read holding whose renewals fail
// and its loss.
func TestObserverRWEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		f := newRWFault()
		l := newRWLocks(t, f, dlock.WithObserver(rec), dlock.WithAutoRenew(300*time.Millisecond))
		w, err := l.Lock(testCtx(t), "rw")
		if err != nil {
			t.Fatal(err)
		}
		granted := time.Now()
		acquired := rwEvent(dlock.EventWaitEnd, dlock.KindWrite, "rw", w)
		acquired.Outcome = dlock.OutcomeAcquired
		expect(t, rec.take(), want{e: rwEvent(dlock.EventWaitStart, dlock.KindWrite, "rw", nil)}, want{e: acquired})

		if _, err := l.TryRLock(testCtx(t), "rw"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryRLock of a written key: %v", err)
		}
		taken := rwEvent(dlock.EventWaitEnd, dlock.KindRead, "rw", nil)
		taken.Outcome = dlock.OutcomeContended
		expect(t, rec.take(), want{e: rwEvent(dlock.EventWaitStart, dlock.KindRead, "rw", nil)}, want{e: taken, err: dlock.ErrNotAcquired})

		if _, err := l.RLock(testCtx(t), "rw", dlock.WithWait(10*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("RLock of a written key: %v", err)
		}
		timedOut := rwEvent(dlock.EventWaitEnd, dlock.KindRead, "rw", nil)
		timedOut.Outcome, timedOut.Waited = dlock.OutcomeTimedOut, 10*time.Millisecond
		expect(t, rec.take(), want{e: rwEvent(dlock.EventWaitStart, dlock.KindRead, "rw", nil)}, want{e: timedOut, err: dlock.ErrNotAcquired})

		time.Sleep(150*time.Millisecond - time.Since(granted))
		synctest.Wait()
		expect(t, rec.take(), want{e: rwEvent(dlock.EventRenewed, dlock.KindWrite, "rw", w)})

		if err := w.Downgrade(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		expect(t, rec.take())
		if err := w.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		released := rwEvent(dlock.EventReleased, dlock.KindRead, "rw", w)
		released.Held = time.Since(granted)
		expect(t, rec.take(), want{e: released})

		r := mustTry(t, l, "r", driver.RWRead)
		granted = time.Now()
		rec.take()
		f.failExt.Store(true)
		<-r.Done()
		synctest.Wait() // the loss's event follows Done
		got := rec.take()
		var ws []want
		for range got[:max(0, len(got)-1)] {
			ws = append(ws, want{e: rwEvent(dlock.EventRenewFailed, dlock.KindRead, "r", r), err: dlock.ErrUnavailable})
		}
		lost := rwEvent(dlock.EventLost, dlock.KindRead, "r", r)
		lost.Outcome, lost.Held = dlock.OutcomeExpired, time.Since(granted)
		ws = append(ws, want{e: lost, err: dlock.ErrExpired})
		if len(ws) < 3 {
			t.Fatalf("events: %s want failed renewals then the loss", dump(got))
		}
		expect(t, got, ws...)
	})
}

// WithObserver passed to one call of an RWLocks that has none observes
// that call and its holding: the wait and the release.
func TestObserverRWPerCall(t *testing.T) {
	rec := &recorder{}
	l := newRWLocks(t, newRWFault())
	o, err := l.RLock(testCtx(t), "seen", dlock.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Release(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	acquired := rwEvent(dlock.EventWaitEnd, dlock.KindRead, "seen", o)
	acquired.Outcome = dlock.OutcomeAcquired
	got := rec.take()
	if len(got) != 3 {
		t.Fatalf("events: %s, want wait.start, wait.end, released", dump(got))
	}
	got[1].Waited, got[2].Held = 0, 0 // real time: not checked
	expect(t, got, want{e: rwEvent(dlock.EventWaitStart, dlock.KindRead, "seen", nil)}, want{e: acquired},
		want{e: rwEvent(dlock.EventReleased, dlock.KindRead, "seen", o)})
}

// spyRW records the tokens of the RW holdings it is asked for.
type spyRW struct {
	*rwFault
	spy *tokenSpy
}

func (m spyRW) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	m.spy.saw(key, token)
	return m.rwFault.AcquireRead(ctx, key, token, ttl)
}

func (m spyRW) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	m.spy.saw(key, token)
	return m.rwFault.AcquireWrite(ctx, key, token, ttl)
}

// logRWEvents runs, in a bubble, calls that make every event of an
// RWLocks (a wait, a refused try, renewals, a release, failed renewals and
// a loss) with obs(logger, spy) observing, logged at level, and returns the
// log, the tokens used and the lost holding's fence.
func logRWEvents(t *testing.T, level slog.Level, obs func(*slog.Logger, *tokenSpy) dlock.Observer) (out []byte, tokens []string, fence uint64) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
		spy := &tokenSpy{}
		f := newRWFault()
		l := newRWLocks(t, spyRW{f, spy}, dlock.WithObserver(obs(logger, spy)), dlock.WithAutoRenew(300*time.Millisecond))
		w := mustTry(t, l, "w", driver.RWWrite)
		if _, err := l.TryRLock(testCtx(t), "w"); err == nil {
			t.Fatal("TryRLock of a written key succeeded")
		}
		time.Sleep(150 * time.Millisecond) // a renewal
		if err := w.Release(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		r := mustTry(t, l, "k", driver.RWRead)
		fence = r.Fence()
		f.failExt.Store(true)
		<-r.Done()
		synctest.Wait()
		out, tokens = buf.Bytes(), spy.list()
	})
	return out, tokens, fence
}

// Through SlogObserver at its default level (Info), an RW holding's loss
// is logged at Warn with kind "read", its fence and cause; acquisitions,
// refused tries, renewals and releases (Debug) are not.
func TestSlogObserverLogsRWLossAtWarn(t *testing.T) {
	out, _, fence := logRWEvents(t, slog.LevelInfo, func(l *slog.Logger, _ *tokenSpy) dlock.Observer { return dlock.SlogObserver(l) })
	var losses, failures int
	for _, m := range logLines(t, out) {
		if m["key"] != "k" || m["level"] != "WARN" {
			t.Fatalf("logged %v: want only Warn lines of key k", m)
		}
		switch m["msg"] {
		case "dlock: renewal failed":
			failures++
		case "dlock: lost":
			losses++
			err, _ := m["err"].(string)
			if m["outcome"] != "expired" || m["fence"] != float64(fence) || m["kind"] != "read" ||
				!strings.Contains(err, `read-write lock "k"`) || !strings.Contains(err, "expired") {
				t.Fatalf("loss logged as %v: want outcome expired, fence %d, kind read and the cause", m, fence)
			}
		}
	}
	if losses != 1 || failures == 0 {
		t.Fatalf("logged %d losses and %d failed renewals, want 1 and some:\n%s", losses, failures, out)
	}
}

// No log line of SlogObserver, at Debug, holds an RW holding's token.
// Negative control: an observer that also logs the lost holding's token is
// caught.
func TestSlogObserverNeverLogsRWToken(t *testing.T) {
	out, tokens, _ := logRWEvents(t, slog.LevelDebug, func(l *slog.Logger, _ *tokenSpy) dlock.Observer { return dlock.SlogObserver(l) })
	if len(tokens) < 3 {
		t.Fatalf("the scenario used %d tokens", len(tokens))
	}
	msgs := map[string]bool{}
	for _, m := range logLines(t, out) {
		msgs[m["msg"].(string)] = true
	}
	for _, msg := range []string{"dlock: wait started", "dlock: acquired", "dlock: not acquired", "dlock: renewed",
		"dlock: renewal failed", "dlock: lost", "dlock: released"} {
		if !msgs[msg] {
			t.Errorf("the scenario logged no %q line", msg)
		}
	}
	if found := leaks(out, tokens); len(found) > 0 {
		t.Fatalf("%d tokens logged:\n%s", len(found), out)
	}

	out, tokens, _ = logRWEvents(t, slog.LevelDebug, func(l *slog.Logger, spy *tokenSpy) dlock.Observer {
		inner := dlock.SlogObserver(l)
		return dlock.ObserverFunc(func(ctx context.Context, e dlock.Event) {
			inner.Event(ctx, e)
			if e.Type == dlock.EventLost {
				l.Warn("leaky", "owner", spy.tokenOf(e.Key))
			}
		})
	})
	if found := leaks(out, tokens); len(found) != 1 {
		t.Fatalf("control: a leaking observer was caught leaking %d tokens, want 1:\n%s", len(found), out)
	}
}

// RWLocks.Close releases the holdings it ends: each emits released.
// Control: a holding released before Close emits nothing more at Close.
func TestObserverRWCloseReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l, err := dlock.NewRWLocks(newRWFault(), dlock.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		held := mustTry(t, l, "held", driver.RWWrite)
		done := mustTry(t, l, "done", driver.RWRead)
		if err := done.Release(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		rec.take()
		time.Sleep(time.Second)
		if err := l.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		released := rwEvent(dlock.EventReleased, dlock.KindWrite, "held", held)
		released.Held = time.Second
		expect(t, rec.take(), want{e: released})
	})
}
