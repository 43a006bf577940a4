package dlockotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"example.com/dlock"
)

// holdID is what the events of one holding have in common. Holdings that
// share it (re-entrant leases, readers granted the same fence) are told
// apart by their start (see take).
type holdID struct {
	key   string
	fence uint64
}

// holding is a granted holding whose end has not been seen.
type holding struct {
	kind  dlock.Kind // at the grant: a downgraded write holding stays "write"
	start time.Time  // on the observer's clock
	span  trace.Span // nil without spans, or when its events go to call
	call  trace.Span // the span of the call that acquired it (BeginCall), or nil
	next  *holding   // another live holding of the same holdID
}

// begin starts the holding that the acquiring wait.end e reports, at now,
// for the call whose span is call (nil: none). The holding has a span of
// its own unless asEvent: then its events go to call.
func (o *Observer) begin(ctx context.Context, now time.Time, e dlock.Event, call trace.Span, asEvent bool) {
	var span trace.Span
	if o.tracer != nil && !unsampled(ctx) && !asEvent {
		_, span = o.tracer.Start(ctx, "dlock.hold", o.attrs(e.Key, e.Kind, "", "").start...)
		if span.IsRecording() {
			span.SetAttributes(AttrFence.Int64(int64(e.Fence)))
		}
	}
	id := holdID{e.Key, e.Fence}
	h := &holding{kind: e.Kind, start: now, span: span, call: call}
	o.mu.Lock()
	h.next = o.live[id]
	o.live[id] = h
	o.mu.Unlock()
}

// renewal adds an event named name, with the renewal's lag, to the span of
// the holding e is about, or to its call's if it has none.
func (o *Observer) renewal(e dlock.Event, name string) {
	var span trace.Span
	o.mu.Lock()
	if h := o.live[holdID{e.Key, e.Fence}]; h != nil {
		span = h.span
		if span == nil {
			span = h.call
		}
	}
	o.mu.Unlock()
	if span != nil && span.IsRecording() {
		span.AddEvent(name, trace.WithAttributes(attribute.Float64("dlock.lag", e.Lag.Seconds())))
	}
}

// end records the end of the holding e is about (released, handed off or
// lost) at now: the held count, the hold time, the loss, and the span. A
// holding whose grant was not seen (the core reports none; a primitive of
// its own might) counts only if lost.
func (o *Observer) end(ctx context.Context, now time.Time, e dlock.Event) {
	h := o.take(e, now)
	if h == nil {
		if e.Type == dlock.EventLost {
			o.inst.lost.Add(ctx, 1, o.attrs(e.Key, e.Kind, "", e.Outcome).add...)
		}
		return
	}
	set := o.attrs(e.Key, h.kind, "", "")
	o.inst.held.Add(ctx, -1, set.add...)
	o.inst.holdDuration.Record(ctx, e.Held.Seconds(), set.rec...)
	if e.Type == dlock.EventLost {
		o.inst.lost.Add(ctx, 1, o.attrs(e.Key, h.kind, "", e.Outcome).add...)
	}
	if h.span != nil {
		endSpan(h.span, e)
	} else if h.call != nil {
		holdEvent(h.call, e)
	}
	if h.call != nil {
		endSpan(h.call, e)
	}
}

// endSpan ends span, a holding's or the call's that acquired it, as the
// holding ends with e: dlock.end says how, a loss is an error.
func endSpan(span trace.Span, e dlock.Event) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch e.Type {
	case dlock.EventLost:
		span.SetAttributes(AttrCause.String(string(e.Outcome)))
		span.SetStatus(codes.Error, "lost: "+string(e.Outcome))
	case dlock.EventReleased:
		if e.Background {
			span.SetAttributes(attribute.Bool("dlock.release.background", true))
		}
	}
	span.SetAttributes(AttrEnd.String(endName(e)))
	span.End()
}

// endName is how a holding ended with e: released, lost or handoff.
func endName(e dlock.Event) string {
	switch e.Type {
	case dlock.EventLost:
		return "lost"
	case dlock.EventHandedOff:
		return "handoff"
	}
	return "released"
}

// holdEvent adds to span, the span of the call that acquired the holding
// that ends with e, the event dlock.hold.end: the time held (dlock.held,
// seconds), how it ended (dlock.end) and, if lost, why (dlock.cause).
func holdEvent(span trace.Span, e dlock.Event) {
	if !span.IsRecording() {
		return
	}
	kv := make([]attribute.KeyValue, 2, 3)
	kv[0] = attribute.Float64("dlock.held", e.Held.Seconds())
	kv[1] = AttrEnd.String(endName(e))
	if e.Type == dlock.EventLost {
		kv = append(kv, AttrCause.String(string(e.Outcome)))
	}
	span.AddEvent("dlock.hold.end", trace.WithAttributes(kv...))
}

// take removes and returns the live holding e ends, nil if none: of those
// with e's key and fence, the one whose start is nearest to now - e.Held.
func (o *Observer) take(e dlock.Event, now time.Time) *holding {
	id := holdID{e.Key, e.Fence}
	granted := now.Add(-e.Held)
	o.mu.Lock()
	defer o.mu.Unlock()
	var best, bestPrev, prev *holding
	for h := o.live[id]; h != nil; prev, h = h, h.next {
		if best == nil || absDur(h.start.Sub(granted)) < absDur(best.start.Sub(granted)) {
			best, bestPrev = h, prev
		}
	}
	switch {
	case best == nil:
		return nil
	case bestPrev != nil:
		bestPrev.next = best.next
	case best.next != nil:
		o.live[id] = best.next
	default:
		delete(o.live, id)
	}
	return best
}

// unsampled reports whether the span in ctx is not sampled: its children,
// a wait's and a hold's spans, would not be either (as the SDK's default
// ParentBased sampler decides), so none is made.
func unsampled(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled()
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
