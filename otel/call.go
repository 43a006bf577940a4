package dlockotel

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"example.com/dlock"
)

// callSpan is the span of one observed call, in the call's context. The
// call's wait.end claims it: it ends there if the wait failed, or with the
// holding the wait acquired.
type callSpan struct {
	o       *Observer // the observer that made it: another's events leave it alone
	span    trace.Span
	claimed atomic.Bool
}

type callKey struct{}

// callNames are the span names of the core's calls, made once.
var callNames = map[string]string{}

func init() {
	for _, n := range []string{"Lock", "TryLock", "Do", "RLock", "TryRLock", "RDo", "Acquire", "TryAcquire", "Wait"} {
		callNames[n] = "dlock." + n
	}
}

// BeginCall implements dlock.CallObserver: it starts the call's span
// (dlock.Lock, dlock.Do, dlock.Acquire, …, a child of the span in ctx) and
// returns ctx with it, so that the store's own spans if it makes any, the
// spans of Do's function and, with WithChildSpans, the call's wait and
// hold spans are its children; by default the wait and the hold are its
// events. Without spans (a no-op TracerProvider) it returns ctx.
func (o *Observer) BeginCall(ctx context.Context, c dlock.Call) context.Context {
	if o.tracer == nil {
		return ctx
	}
	name, ok := callNames[c.Name]
	if !ok {
		name = "dlock." + c.Name
	}
	ctx, span := o.tracer.Start(ctx, name, o.attrs(c.Key, c.Kind, "", "").start...)
	if !span.IsRecording() {
		return ctx // not sampled: nor are the wait's and the hold's spans
	}
	return context.WithValue(ctx, callKey{}, &callSpan{o: o, span: span})
}

// claim returns the span of the call whose wait.end has ctx, nil if ctx has
// none of this observer's, or if it was claimed already (an event of a call
// made inside Do's function, through an observer that hides this one's
// BeginCall).
func (o *Observer) claim(ctx context.Context) trace.Span {
	c, _ := ctx.Value(callKey{}).(*callSpan)
	if c == nil || c.o != o || !c.claimed.CompareAndSwap(false, true) {
		return nil
	}
	return c.span
}

// endCallAtWait ends span, the span of a call whose wait ended without a
// holding (it failed, or it was a Limiter's wait), with the wait's
// outcome.
func endCallAtWait(span trace.Span, e dlock.Event) {
	if span.IsRecording() {
		span.SetAttributes(AttrOutcome.String(string(e.Outcome)))
		if waitFailed(e.Outcome) {
			span.SetStatus(codes.Error, string(e.Outcome))
		}
	}
	span.End()
}

// waitEvent adds to span, the span of the call whose wait ended with e,
// the event dlock.wait.end: the wait's outcome (dlock.outcome), its
// duration (dlock.waited, seconds) and, if it acquired, the holding's
// fence (dlock.fence).
func waitEvent(span trace.Span, e dlock.Event) {
	if !span.IsRecording() {
		return
	}
	kv := make([]attribute.KeyValue, 2, 3)
	kv[0] = AttrOutcome.String(string(e.Outcome))
	kv[1] = attribute.Float64("dlock.waited", e.Waited.Seconds())
	if e.Outcome == dlock.OutcomeAcquired {
		kv = append(kv, AttrFence.Int64(int64(e.Fence)))
	}
	span.AddEvent("dlock.wait.end", trace.WithAttributes(kv...))
}
