package dlockotel_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"example.com/dlock"
	dlockotel "example.com/dlock/otel"
)

// sink is where an Observer under test records: a manual metric reader
// and an in-memory span recorder.
type sink struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	mp     *sdkmetric.MeterProvider
	tp     *sdktrace.TracerProvider
}

func newSink() *sink {
	s := &sink{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	return s
}

// observer returns an Observer recording to s, with opts.
func (s *sink) observer(t *testing.T, opts ...dlockotel.Option) *dlockotel.Observer {
	t.Helper()
	o, err := dlockotel.NewObserver(append([]dlockotel.Option{
		dlockotel.WithMeterProvider(s.mp), dlockotel.WithTracerProvider(s.tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// point is one metric data point: its attributes and its value (a sum's
// value, or a histogram's count and sum).
type point struct {
	attrs attribute.Set
	value float64
	count uint64
}

// metrics collects s's metrics: name -> points.
func (s *sink) metrics(t *testing.T) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{attrs: p.Attributes, value: p.Sum, count: p.Count})
				}
			default:
				t.Fatalf("metric %s has data of type %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// find returns the point of name whose attributes are exactly kv.
func find(t *testing.T, ms map[string][]point, name string, kv ...attribute.KeyValue) point {
	t.Helper()
	want := attribute.NewSet(kv...)
	for _, p := range ms[name] {
		if p.attrs.Equals(&want) {
			return p
		}
	}
	t.Fatalf("%s has no point with %v; it has:\n%s", name, want.Encoded(attribute.DefaultEncoder()), dumpMetrics(ms))
	return point{}
}

func dumpMetrics(ms map[string][]point) string {
	var lines []string
	for name, ps := range ms {
		for _, p := range ps {
			lines = append(lines, fmt.Sprintf("  %s{%s} value=%g count=%d", name,
				p.attrs.Encoded(attribute.DefaultEncoder()), p.value, p.count))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// near reports whether got (seconds) is want within slack.
func near(got float64, want, slack time.Duration) bool {
	d := time.Duration(got*float64(time.Second)) - want
	return d >= -slack && d <= slack
}

// strings returns every string s recorded: metric attributes, span names,
// attributes, events' names and attributes, status descriptions.
func (s *sink) strings(t *testing.T) (metricStrs, spanStrs []string) {
	t.Helper()
	for _, ps := range s.metrics(t) {
		for _, p := range ps {
			for _, kv := range p.attrs.ToSlice() {
				metricStrs = append(metricStrs, string(kv.Key), kv.Value.Emit())
			}
		}
	}
	for _, sp := range s.spans.Ended() {
		spanStrs = append(spanStrs, sp.Name(), sp.Status().Description)
		for _, kv := range sp.Attributes() {
			spanStrs = append(spanStrs, string(kv.Key), kv.Value.Emit())
		}
		for _, ev := range sp.Events() {
			spanStrs = append(spanStrs, ev.Name)
			for _, kv := range ev.Attributes {
				spanStrs = append(spanStrs, string(kv.Key), kv.Value.Emit())
			}
		}
	}
	return metricStrs, spanStrs
}

// span returns the one ended span named name whose attribute key is
// val.
func (s *sink) span(t *testing.T, name string, key attribute.Key, val string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, sp := range s.spans.Ended() {
		if sp.Name() != name {
			continue
		}
		for _, kv := range sp.Attributes() {
			if kv.Key == key && kv.Value.Emit() == val {
				found = append(found, sp)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s spans with %s=%s, want 1", len(found), name, key, val)
	}
	return found[0]
}

// attr returns the value of sp's attribute key, "" if it has none.
func attr(sp sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range sp.Attributes() {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

var _ dlock.Observer = (*dlockotel.Observer)(nil)
