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
	span  trace.Span // nil without spans
	call  trace.Span // the span of the call that acquired it (BeginCall), or nil
}

// begin starts the holding that the acquiring wait.end e reports, at now,
// for the call whose span is call (nil: none).
func (o *Observer) begin(ctx context.Context, now time.Time, e dlock.Event, call trace.Span) {
	var span trace.Span
	if o.tracer != nil {
		_, span = o.tracer.Start(ctx, "dlock.hold", trace.WithTimestamp(now), internalSpan)
		if span.IsRecording() {
			span.SetAttributes(o.list(e.Key, e.Kind, "", "")...)
			span.SetAttributes(AttrFence.Int64(int64(e.Fence)))
		}
	}
	id := holdID{e.Key, e.Fence}
	o.mu.Lock()
	o.live[id] = append(o.live[id], &holding{kind: e.Kind, start: now, span: span, call: call})
	o.mu.Unlock()
}

// renewal adds an event named name, with the renewal's lag, to the span of
// the holding e is about.
func (o *Observer) renewal(e dlock.Event, name string) {
	var span trace.Span
	o.mu.Lock()
	if hs := o.live[holdID{e.Key, e.Fence}]; len(hs) > 0 {
		span = hs[0].span
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
			o.inst.lost.Add(ctx, 1, o.attrs(e.Key, e.Kind, "", e.Outcome))
		}
		return
	}
	set := o.attrs(e.Key, h.kind, "", "")
	o.inst.held.Add(ctx, -1, set)
	o.inst.holdDuration.Record(ctx, e.Held.Seconds(), set)
	if e.Type == dlock.EventLost {
		o.inst.lost.Add(ctx, 1, o.attrs(e.Key, h.kind, "", e.Outcome))
	}
	opt := trace.WithTimestamp(now)
	if h.span != nil {
		endSpan(h.span, e, opt)
	}
	if h.call != nil {
		endSpan(h.call, e, opt)
	}
}

// endSpan ends span, a holding's or the call's that acquired it, as the
// holding ends with e: dlock.end says how, a loss is an error.
func endSpan(span trace.Span, e dlock.Event, opt trace.SpanEndOption) {
	if !span.IsRecording() {
		span.End()
		return
	}
	end := "released"
	switch e.Type {
	case dlock.EventLost:
		end = "lost"
		span.SetAttributes(AttrCause.String(string(e.Outcome)))
		span.SetStatus(codes.Error, "lost: "+string(e.Outcome))
	case dlock.EventHandedOff:
		end = "handoff"
	case dlock.EventReleased:
		if e.Background {
			span.SetAttributes(attribute.Bool("dlock.release.background", true))
		}
	}
	span.SetAttributes(AttrEnd.String(end))
	span.End(opt)
}

// take removes and returns the live holding e ends, nil if none: of those
// with e's key and fence, the one whose start is nearest to now - e.Held.
func (o *Observer) take(e dlock.Event, now time.Time) *holding {
	id := holdID{e.Key, e.Fence}
	granted := now.Add(-e.Held)
	o.mu.Lock()
	defer o.mu.Unlock()
	hs := o.live[id]
	if len(hs) == 0 {
		return nil
	}
	best := 0
	for i, h := range hs {
		if absDur(h.start.Sub(granted)) < absDur(hs[best].start.Sub(granted)) {
			best = i
		}
	}
	h := hs[best]
	hs = append(hs[:best], hs[best+1:]...)
	if len(hs) == 0 {
		delete(o.live, id)
	} else {
		o.live[id] = hs
	}
	return h
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
