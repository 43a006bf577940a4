// Package dlockotel turns the events of dlock's Observer into
// OpenTelemetry metrics and spans.
//
//	obs, err := dlockotel.NewObserver()
//	c, err := dlock.New(store, dlock.WithObserver(obs))
//
// It is a module of its own (example.com/dlock/otel), so that a user of
// dlock who does not want OpenTelemetry does not build it. The metrics and
// spans, their attributes and their cost are described in the repository's
// docs/observability.md.
//
// The attributes have a bounded cardinality by default: the primitive's
// kind, a wait's outcome, a loss's cause. The key is recorded only with
// WithKeyAttribute. The owner token is never recorded, nor any error's text
// (which may name the key).
package dlockotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"example.com/dlock"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "example.com/dlock/otel"

// The attribute keys.
const (
	AttrKind    = attribute.Key("dlock.kind")    // the primitive: lock, permit, read, write, …
	AttrOutcome = attribute.Key("dlock.outcome") // how a wait, a decision or a guarded call ended: acquired, allowed, replayed, …
	AttrCause   = attribute.Key("dlock.cause")   // why a holding was lost: expired, taken, closed
	AttrKey     = attribute.Key("dlock.key")     // the key, only with WithKeyAttribute
	AttrFence   = attribute.Key("dlock.fence")   // spans only: the holding's fencing token
	AttrEnd     = attribute.Key("dlock.end")     // hold spans only: released, lost or handoff
)

// Option configures NewObserver.
type Option func(*config)

type config struct {
	mp         metric.MeterProvider
	tp         trace.TracerProvider
	withKey    bool
	childSpans bool
}

// WithMeterProvider records the metrics with mp. Default: the global
// MeterProvider (otel.GetMeterProvider) at NewObserver's call.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider records the spans with tp. Default: the global
// TracerProvider (otel.GetTracerProvider) at NewObserver's call. With
// noop.NewTracerProvider() the Observer makes no spans at all, at no cost.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithKeyAttribute adds the key (attribute dlock.key) to every metric point
// and span. Each key then has series of its own in every metric: as many
// as keys × kinds × outcomes. Use it only when the keys are few and fixed.
// Default: off.
func WithKeyAttribute() Option {
	return func(c *config) { c.withKey = true }
}

// WithChildSpans records a call's wait and its holding as spans of their
// own, dlock.wait and dlock.hold, children of the call's span: three spans
// a Lock+Release instead of one. Default: off, the call's span carries
// them as events (dlock.wait.end, dlock.renewed, dlock.renew.failed,
// dlock.hold.end), at a third of the SDK's per-span cost. Events that have
// no call span to go to (an Observer reached only through its Event
// method) are spans in either shape.
func WithChildSpans() Option {
	return func(c *config) { c.childSpans = true }
}

// Observer is a dlock.Observer that records OpenTelemetry metrics and
// spans. It is safe for concurrent use and does not block beyond what its
// providers do when recording.
type Observer struct {
	withKey    bool
	childSpans bool         // the wait and the hold are spans, not events of the call's span
	tracer     trace.Tracer // nil: no spans
	inst       instruments
	setsMu     sync.RWMutex
	sets       map[setKey]*attrSet // when withKey is off

	mu   sync.Mutex
	live map[holdID]*holding // the holdings granted and not yet ended, chained by next
}

// NewObserver returns an Observer recording to the providers of opts. It
// fails only if the MeterProvider refuses to create an instrument.
func NewObserver(opts ...Option) (*Observer, error) {
	cfg := config{}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	inst, err := newInstruments(cfg.mp.Meter(ScopeName))
	if err != nil {
		return nil, err
	}
	var tracer trace.Tracer
	if _, off := cfg.tp.(noop.TracerProvider); !off {
		tracer = cfg.tp.Tracer(ScopeName)
	}
	return &Observer{
		withKey:    cfg.withKey,
		childSpans: cfg.childSpans,
		tracer:     tracer,
		inst:       inst,
		sets:       map[setKey]*attrSet{},
		live:       map[holdID]*holding{},
	}, nil
}

// Event implements dlock.Observer. A Limiter's decisions and a Guard's
// results are counted (no span: each is one store call); a Limiter's wait
// is recorded as a lock's is, without a holding. Event types it does not
// know (those of other primitives) are ignored.
func (o *Observer) Event(ctx context.Context, e dlock.Event) {
	now := time.Now()
	switch e.Type {
	case dlock.EventWaitEnd:
		o.waitEnd(ctx, now, e)
	case dlock.EventRenewed:
		o.inst.renewLag.Record(ctx, e.Lag.Seconds(), o.attrs(e.Key, e.Kind, "", "").rec...)
		o.renewal(e, "dlock.renewed")
	case dlock.EventRenewFailed:
		o.inst.renewFailures.Add(ctx, 1, o.attrs(e.Key, e.Kind, "", "").add...)
		o.renewal(e, "dlock.renew.failed")
	case dlock.EventReleased, dlock.EventHandedOff, dlock.EventLost:
		o.end(ctx, now, e)
	case dlock.EventLimitDecision:
		o.inst.decisions.Add(ctx, 1, o.attrs(e.Key, e.Kind, e.Outcome, "").add...)
	case dlock.EventIdempotencyResult:
		o.inst.results.Add(ctx, 1, o.attrs(e.Key, e.Kind, e.Outcome, "").add...)
	}
}

// setKey names a cached attribute set.
type setKey struct {
	kind, outcome, cause string
}

// attrSet is one set of attributes, as the instruments and spans take it:
// made once, so that recording it allocates nothing.
type attrSet struct {
	rec   []metric.RecordOption
	add   []metric.AddOption
	start []trace.SpanStartOption // a span's kind (internal) and these attributes
}

// newAttrSet returns the set of kv.
func newAttrSet(kv []attribute.KeyValue) *attrSet {
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &attrSet{rec: []metric.RecordOption{opt}, add: []metric.AddOption{opt},
		start: []trace.SpanStartOption{internalSpan, trace.WithAttributes(kv...)}}
}

// attrs returns the attributes of an event about key of kind, with
// outcome and cause where set: made once per set unless the key is
// recorded.
func (o *Observer) attrs(key string, kind dlock.Kind, outcome dlock.Outcome, cause dlock.Outcome) *attrSet {
	if o.withKey {
		return newAttrSet(o.list(key, kind, outcome, cause))
	}
	k := setKey{string(kind), string(outcome), string(cause)}
	o.setsMu.RLock()
	set, ok := o.sets[k]
	o.setsMu.RUnlock()
	if ok {
		return set
	}
	set = newAttrSet(o.list(key, kind, outcome, cause))
	o.setsMu.Lock()
	o.sets[k] = set
	o.setsMu.Unlock()
	return set
}

// list returns the attributes of an event: kind, outcome and cause where
// set, and the key if recorded.
func (o *Observer) list(key string, kind dlock.Kind, outcome, cause dlock.Outcome) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 4)
	kv = append(kv, AttrKind.String(string(kind)))
	if outcome != "" {
		kv = append(kv, AttrOutcome.String(string(outcome)))
	}
	if cause != "" {
		kv = append(kv, AttrCause.String(string(cause)))
	}
	if o.withKey {
		kv = append(kv, AttrKey.String(key))
	}
	return kv
}

// waitEnd records a wait (its duration; its span, or its event on the
// call's span) and, when it acquired, starts the holding.
func (o *Observer) waitEnd(ctx context.Context, now time.Time, e dlock.Event) {
	set := o.attrs(e.Key, e.Kind, e.Outcome, "")
	o.inst.waitDuration.Record(ctx, e.Waited.Seconds(), set.rec...)
	var call trace.Span
	if o.tracer != nil {
		call = o.claim(ctx)
	}
	asEvent := call != nil && !o.childSpans
	if asEvent {
		waitEvent(call, e)
	}
	if e.Outcome == dlock.OutcomeAcquired {
		o.inst.held.Add(ctx, 1, o.attrs(e.Key, e.Kind, "", "").add...)
		o.begin(ctx, now, e, call, asEvent)
	} else if call != nil {
		defer endCallAtWait(call, e)
	}
	if o.tracer == nil || unsampled(ctx) || asEvent {
		return
	}
	_, span := o.tracer.Start(ctx, "dlock.wait", trace.WithTimestamp(now.Add(-e.Waited)), set.start[0], set.start[1])
	if span.IsRecording() {
		if e.Outcome == dlock.OutcomeAcquired {
			span.SetAttributes(AttrFence.Int64(int64(e.Fence)))
		}
		if waitFailed(e.Outcome) {
			span.SetStatus(codes.Error, string(e.Outcome))
		}
	}
	span.End()
}

// internalSpan is the kind of every span.
var internalSpan = trace.WithSpanKind(trace.SpanKindInternal)

// waitFailed reports whether a wait that ended with outcome is an error
// of its span: the store refused or did not answer, the request was
// invalid, or the wait timed out. A contended try and a cancelled wait
// are the caller's choice, not errors.
func waitFailed(outcome dlock.Outcome) bool {
	switch outcome {
	case dlock.OutcomeAcquired, dlock.OutcomeAllowed, dlock.OutcomeContended, dlock.OutcomeCancelled:
		return false
	}
	return true
}
