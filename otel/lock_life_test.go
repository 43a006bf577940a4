package dlockotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"example.com/dlock"
	"example.com/dlock/memstore"
	dlockotel "example.com/dlock/otel"
)

// life is what lockLife did: the tokens of its leases and the span its
// calls ran under.
type life struct {
	tokens []string
	parent trace.SpanContext
}

// lockLife runs a lock's life on memstore, observed by o, inside a
// synctest bubble (so that durations are exact), under a span "op" of s:
// Lock orders/42, a TryLock of it that is contended, 250 ms held (two
// renewals), Release; Lock orders/43, taken from it in the store, lost at
// its first renewal (100 ms). whileHeld, if set, runs while orders/42 is
// held.
func lockLife(t *testing.T, s *sink, o dlock.Observer, whileHeld func()) life {
	var lf life
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		c, err := dlock.New(store, dlock.WithObserver(o), dlock.WithAutoRenew(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx, op := s.tp.Tracer("test").Start(context.Background(), "op")
		defer op.End()
		lf.parent = op.SpanContext()
		a, err := c.Lock(ctx, "orders/42")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TryLock(ctx, "orders/42"); err == nil {
			t.Fatal("TryLock of a held key succeeded")
		}
		if whileHeld != nil {
			whileHeld()
		}
		time.Sleep(250 * time.Millisecond) // renewals at 100 and 200 ms
		synctest.Wait()
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := c.Lock(ctx, "orders/43")
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Release(ctx, b.Key(), b.Token()); err != nil {
			t.Fatal(err)
		}
		<-b.Done()
		synctest.Wait() // the loss's event follows Done
		if !errors.Is(b.Err(), dlock.ErrLost) {
			t.Fatalf("b.Err() = %v", b.Err())
		}
		lf.tokens = []string{a.Token(), b.Token()}
	})
	return lf
}

// A lock's life gives the wait histogram a point per wait by outcome, the
// hold histogram the two holds (250 ms released, 100 ms lost), the held
// counter 1 while held and 0 after, a loss with cause taken, a failed
// renewal and two renewal lags.
func TestLockLifeMetrics(t *testing.T) {
	s := newSink()
	lockLife(t, s, s.observer(t), func() {
		ms := s.metrics(t)
		if p := find(t, ms, dlockotel.MetricHeld, dlockotel.AttrKind.String("lock")); p.value != 1 {
			t.Errorf("dlock.held while orders/42 is held = %g, want 1", p.value)
		}
	})
	ms := s.metrics(t)
	lock := dlockotel.AttrKind.String("lock")
	if p := find(t, ms, dlockotel.MetricWaitDuration, lock, dlockotel.AttrOutcome.String("acquired")); p.count != 2 {
		t.Errorf("acquired waits: %d, want 2", p.count)
	}
	if p := find(t, ms, dlockotel.MetricWaitDuration, lock, dlockotel.AttrOutcome.String("contended")); p.count != 1 {
		t.Errorf("contended waits: %d, want 1", p.count)
	}
	if p := find(t, ms, dlockotel.MetricHeld, lock); p.value != 0 {
		t.Errorf("dlock.held after both ended = %g, want 0", p.value)
	}
	if p := find(t, ms, dlockotel.MetricHoldDuration, lock); p.count != 2 || !near(p.value, 350*time.Millisecond, time.Millisecond) {
		t.Errorf("holds: %d summing %gs, want 2 summing 0.35s", p.count, p.value)
	}
	if p := find(t, ms, dlockotel.MetricLost, lock, dlockotel.AttrCause.String("taken")); p.value != 1 {
		t.Errorf("losses (taken): %g, want 1", p.value)
	}
	if p := find(t, ms, dlockotel.MetricRenewFailures, lock); p.value != 1 {
		t.Errorf("renewal failures: %g, want 1", p.value)
	}
	if p := find(t, ms, dlockotel.MetricRenewLag, lock); p.count != 2 {
		t.Errorf("renewal lags: %d, want 2", p.count)
	}
	if len(ms) != 6 {
		t.Errorf("%d metrics, want 6:\n%s", len(ms), dumpMetrics(ms))
	}
}

// With WithChildSpans, a lock's life gives a span per call (dlock.Lock,
// dlock.TryLock), child of the caller's span, and under it a dlock.wait
// span per wait and a dlock.hold span per holding, with the renewals as
// events; a lost holding's span, and its call's, end in error with its
// cause.
func TestLockLifeChildSpans(t *testing.T) {
	s := newSink()
	lf := lockLife(t, s, s.observer(t, dlockotel.WithChildSpans()), nil)
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range s.spans.Ended() {
		byID[sp.SpanContext().SpanID()] = sp
	}
	var waits, holds int
	for _, sp := range s.spans.Ended() {
		switch sp.Name() {
		case "dlock.wait":
			waits++
		case "dlock.hold":
			holds++
		default:
			continue
		}
		call := byID[sp.Parent().SpanID()]
		if call == nil || (call.Name() != "dlock.Lock" && call.Name() != "dlock.TryLock") || call.Parent().SpanID() != lf.parent.SpanID() {
			t.Errorf("%s span's parent is %v, want a dlock.Lock or dlock.TryLock span under the caller's span %v", sp.Name(), sp.Parent(), lf.parent)
		}
		if attr(sp, dlockotel.AttrKind) != "lock" {
			t.Errorf("%s span's kind is %q", sp.Name(), attr(sp, dlockotel.AttrKind))
		}
	}
	if waits != 3 || holds != 2 {
		t.Fatalf("%d wait spans and %d hold spans, want 3 and 2", waits, holds)
	}
	contended := s.span(t, "dlock.wait", dlockotel.AttrOutcome, "contended")
	if contended.Status().Code == codes.Error {
		t.Errorf("a contended try's span is an error: %v", contended.Status())
	}
	released := s.span(t, "dlock.hold", dlockotel.AttrEnd, "released")
	if d := released.EndTime().Sub(released.StartTime()); d != 250*time.Millisecond {
		t.Errorf("released hold span lasted %v, want 250ms", d)
	}
	if ev := released.Events(); len(ev) != 2 || ev[0].Name != "dlock.renewed" || ev[1].Name != "dlock.renewed" {
		t.Errorf("released hold span's events: %v, want two dlock.renewed", ev)
	}
	if attr(released, dlockotel.AttrFence) == "" {
		t.Error("hold span without a fence")
	}
	lost := s.span(t, "dlock.hold", dlockotel.AttrEnd, "lost")
	if d := lost.EndTime().Sub(lost.StartTime()); d != 100*time.Millisecond {
		t.Errorf("lost hold span lasted %v, want 100ms", d)
	}
	if attr(lost, dlockotel.AttrCause) != "taken" || lost.Status().Code != codes.Error {
		t.Errorf("lost hold span: cause %q, status %v; want taken, Error", attr(lost, dlockotel.AttrCause), lost.Status())
	}
	if ev := lost.Events(); len(ev) != 1 || ev[0].Name != "dlock.renew.failed" {
		t.Errorf("lost hold span's events: %v, want one dlock.renew.failed", ev)
	}
	lostCall := byID[lost.Parent().SpanID()]
	if lostCall == nil || lostCall.EndTime() != lost.EndTime() || lostCall.Status().Code != codes.Error || attr(lostCall, dlockotel.AttrEnd) != "lost" {
		t.Errorf("the lost holding's call span does not end with it, in error")
	}
}

// By default a lock's life gives one span per call, child of the caller's
// span, and no other: a Lock's span lasts until its holding ends and
// carries, in order, dlock.wait.end (outcome, fence), the renewals and
// dlock.hold.end (held, end, cause); a contended TryLock's, its
// dlock.wait.end only, and no error; a lost holding's call span ends in
// error with its cause.
func TestLockLifeSpans(t *testing.T) {
	s := newSink()
	lf := lockLife(t, s, s.observer(t), nil)
	for _, sp := range s.spans.Ended() {
		if sp.Name() != "op" && sp.Parent().SpanID() != lf.parent.SpanID() {
			t.Errorf("a %s span whose parent is %v, want the caller's span %v", sp.Name(), sp.Parent(), lf.parent)
		}
	}
	if n := len(s.spans.Ended()); n != 4 {
		t.Errorf("%d spans, want 4: op, 2 dlock.Lock, dlock.TryLock", n)
	}
	contended := s.span(t, "dlock.TryLock", dlockotel.AttrOutcome, "contended")
	checkEvents(t, contended, "dlock.wait.end dlock.outcome=contended")
	if contended.Status().Code == codes.Error {
		t.Errorf("a contended try's span is an error: %v", contended.Status())
	}
	released := s.span(t, "dlock.Lock", dlockotel.AttrEnd, "released")
	if d := released.EndTime().Sub(released.StartTime()); d != 250*time.Millisecond {
		t.Errorf("released lock's call span lasted %v, want 250ms", d)
	}
	checkEvents(t, released, "dlock.wait.end dlock.outcome=acquired", "dlock.renewed", "dlock.renewed",
		"dlock.hold.end dlock.end=released dlock.held=0.25")
	if evAttr(released.Events()[0], dlockotel.AttrFence) == "" {
		t.Error("dlock.wait.end without a fence")
	}
	lost := s.span(t, "dlock.Lock", dlockotel.AttrEnd, "lost")
	if d := lost.EndTime().Sub(lost.StartTime()); d != 100*time.Millisecond {
		t.Errorf("lost lock's call span lasted %v, want 100ms", d)
	}
	if attr(lost, dlockotel.AttrCause) != "taken" || lost.Status().Code != codes.Error {
		t.Errorf("lost lock's call span: cause %q, status %v; want taken, Error", attr(lost, dlockotel.AttrCause), lost.Status())
	}
	checkEvents(t, lost, "dlock.wait.end dlock.outcome=acquired", "dlock.renew.failed",
		"dlock.hold.end dlock.end=lost dlock.held=0.1 dlock.cause=taken")
}

// checkEvents checks that sp's events are want, in order: each a name and
// the attributes (key=value) it must have.
func checkEvents(t *testing.T, sp sdktrace.ReadOnlySpan, want ...string) {
	t.Helper()
	evs := sp.Events()
	if len(evs) != len(want) {
		t.Errorf("%s span's events: %v, want %v", sp.Name(), evs, want)
		return
	}
	for i, w := range want {
		f := strings.Fields(w)
		if evs[i].Name != f[0] {
			t.Errorf("%s span's event %d: %s, want %s", sp.Name(), i, evs[i].Name, f[0])
		}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			if got := evAttr(evs[i], attribute.Key(k)); got != v {
				t.Errorf("%s span's event %s: %s=%q, want %q", sp.Name(), f[0], k, got, v)
			}
		}
	}
}

// evAttr returns the value of ev's attribute key, "" if it has none.
func evAttr(ev sdktrace.Event, key attribute.Key) string {
	for _, kv := range ev.Attributes {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// With a no-op TracerProvider the Observer makes no span and its metrics
// are the same: the holdings are still counted by kind.
func TestMetricsWithoutSpans(t *testing.T) {
	s := newSink()
	lockLife(t, s, s.observer(t, dlockotel.WithTracerProvider(noop.NewTracerProvider())), nil)
	for _, sp := range s.spans.Ended() {
		if sp.Name() != "op" {
			t.Errorf("a %s span with a no-op TracerProvider", sp.Name())
		}
	}
	ms := s.metrics(t)
	lock := dlockotel.AttrKind.String("lock")
	if p := find(t, ms, dlockotel.MetricHeld, lock); p.value != 0 {
		t.Errorf("dlock.held after both ended = %g, want 0", p.value)
	}
	if p := find(t, ms, dlockotel.MetricHoldDuration, lock); p.count != 2 || !near(p.value, 350*time.Millisecond, time.Millisecond) {
		t.Errorf("holds: %d summing %gs, want 2 summing 0.35s", p.count, p.value)
	}
	if p := find(t, ms, dlockotel.MetricLost, lock, dlockotel.AttrCause.String("taken")); p.value != 1 {
		t.Errorf("losses (taken): %g, want 1", p.value)
	}
}
