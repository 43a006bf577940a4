package dlockotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"example.com/dlock"
	"example.com/dlock/memstore"
	dlockotel "example.com/dlock/otel"
)

// lockReleaseAllocs is what an uncontended Lock and Release on memstore
// allocate, observed by obs (nil: none).
func lockReleaseAllocs(t *testing.T, obs dlock.Observer) float64 {
	var opts []dlock.Option
	if obs != nil {
		opts = append(opts, dlock.WithObserver(obs))
	}
	c, err := dlock.New(memstore.New(nil), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	return testing.AllocsPerRun(500, func() {
		l, err := c.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// The adapter's allocations per Lock+Release, over none: with metrics
// only, the core's watch and the adapter's live holding (2; the attribute
// sets and the instruments' option slices are made once); with spans that
// are not sampled, at most 3 more (the SDK's non-recording call span and
// the context that carries it; no wait or hold span is started under it).
// Before the cost was cut they were 8 and 23. With every call traced, one
// span a call with the wait and the hold as its events (23 at the time of
// writing); control: the same with WithChildSpans, three spans a call, at
// least 6 more (the SDK's two more spans and their attributes; 32 at the
// time of writing), which fails if the events shape made child spans.
func TestObserverAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	observer := func(tp *sdktrace.TracerProvider, more ...dlockotel.Option) dlock.Observer {
		opts := []dlockotel.Option{dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(noop.NewTracerProvider())}
		if tp != nil {
			opts[1] = dlockotel.WithTracerProvider(tp)
		}
		o, err := dlockotel.NewObserver(append(opts, more...)...)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	off := lockReleaseAllocs(t, nil)
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	always := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	var n []float64
	for _, c := range []struct {
		name     string
		obs      dlock.Observer
		min, max float64
	}{
		{"metrics", observer(nil), 2, 2},
		{"metrics, spans not sampled", observer(never), 2, 5},
		{"metrics and spans, one a call", observer(always), 10, 26},
		{"metrics and spans, three a call (control)", observer(always, dlockotel.WithChildSpans()), 16, 1000},
	} {
		n = append(n, lockReleaseAllocs(t, c.obs)-off)
		t.Logf("%s: %v allocations over %v", c.name, n[len(n)-1], off)
		if got := n[len(n)-1]; got < c.min || got > c.max {
			t.Errorf("%s: %v allocations more than without an observer, want %v to %v", c.name, got, c.min, c.max)
		}
	}
	if n[3] < n[2]+6 {
		t.Errorf("three spans a call: %v allocations, one span a call: %v; want at least 6 more for the two child spans", n[3], n[2])
	}
}
