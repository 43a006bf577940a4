package dlockotel_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"example.com/dlock"
	"example.com/dlock/memstore"
	dlockotel "example.com/dlock/otel"
)

// spanTree runs, under a span "op", a Client's Do whose function starts a
// span "work" and tries the held key with the caller's context (a
// contended TryLock), an RWLocks' RDo, a Semaphores' Acquire and Release,
// and a Limiter's Wait, each observed by obs (built on tp), and returns
// the tree of the spans exp received: one line per span, indented under its
// parent, siblings by name.
func spanTree(t *testing.T, tp *sdktrace.TracerProvider, exp *tracetest.InMemoryExporter, obs dlock.Observer) string {
	store := memstore.New(nil)
	c, err := dlock.New(store, dlock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rw, err := dlock.NewRWLocks(store, dlock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close(context.Background())
	sems, err := dlock.NewSemaphores(store, dlock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer sems.Close(context.Background())
	lim, err := dlock.NewLimiter(store, dlock.RateLimit{Rate: 10, Period: time.Second, Burst: 1}, dlock.WithLimiterObserver(obs))
	if err != nil {
		t.Fatal(err)
	}

	ctx, op := tp.Tracer("test").Start(t.Context(), "op")
	err = c.Do(ctx, "k", func(fctx context.Context) error {
		_, work := tp.Tracer("test").Start(fctx, "work")
		defer work.End()
		if _, err := c.TryLock(ctx, "k"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("TryLock of a held key: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.RDo(ctx, "r", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	p, err := sems.Acquire(ctx, "s", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lim.Wait(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	op.End()
	return renderTree(exp.GetSpans())
}

// renderTree draws spans as an indented tree, siblings sorted by name, a
// span's events after its name.
func renderTree(spans tracetest.SpanStubs) string {
	kids := map[trace.SpanID][]tracetest.SpanStub{}
	var roots []tracetest.SpanStub
	for _, sp := range spans {
		if sp.Parent.IsValid() {
			kids[sp.Parent.SpanID()] = append(kids[sp.Parent.SpanID()], sp)
		} else {
			roots = append(roots, sp)
		}
	}
	var b strings.Builder
	var draw func(sp tracetest.SpanStub, depth int)
	draw = func(sp tracetest.SpanStub, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + sp.Name)
		for _, ev := range sp.Events {
			b.WriteString(" " + ev.Name)
		}
		b.WriteString("\n")
		ks := kids[sp.SpanContext.SpanID()]
		sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
		for _, k := range ks {
			draw(k, depth+1)
		}
	}
	for _, r := range roots {
		draw(r, 0)
	}
	return b.String()
}

// Each call is one span under the caller's, its wait and its hold
// recorded as its events; Do's function runs in the call's span, so its
// spans nest there (a TryLock made in it with the caller's context is the
// caller's child). Control: the same Observer behind an ObserverFunc,
// which hides BeginCall, gives the flat tree of before, the wait and the
// hold as spans since no call span carries their events.
func TestCallSpanTree(t *testing.T) {
	got, flat := callSpanTrees(t)
	want := `op
  dlock.Acquire dlock.wait.end dlock.hold.end
  dlock.Do dlock.wait.end dlock.hold.end
    work
  dlock.RDo dlock.wait.end dlock.hold.end
  dlock.TryLock dlock.wait.end
  dlock.Wait dlock.wait.end
`
	if got != want {
		t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
	if flat != flatTree {
		t.Errorf("spans of a plain Observer (control):\n%s\nwant:\n%s", flat, flatTree)
	}
}

// With WithChildSpans each call's wait and hold are spans of their own,
// children of the call's. Control: as in TestCallSpanTree.
func TestCallSpanTreeWithChildSpans(t *testing.T) {
	got, flat := callSpanTrees(t, dlockotel.WithChildSpans())
	want := `op
  dlock.Acquire
    dlock.hold
    dlock.wait
  dlock.Do
    dlock.hold
    dlock.wait
    work
  dlock.RDo
    dlock.hold
    dlock.wait
  dlock.TryLock
    dlock.wait
  dlock.Wait
    dlock.wait
`
	if got != want {
		t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
	if flat != flatTree {
		t.Errorf("spans of a plain Observer (control):\n%s\nwant:\n%s", flat, flatTree)
	}
}

// flatTree is spanTree's tree for an Observer without BeginCall, in
// either shape.
const flatTree = `op
  dlock.hold
  dlock.hold
  dlock.hold
  dlock.wait
  dlock.wait
  dlock.wait
  dlock.wait
  dlock.wait
  work
`

// callSpanTrees returns spanTree's tree for an Observer made with opts,
// and for the same Observer behind an ObserverFunc.
func callSpanTrees(t *testing.T, opts ...dlockotel.Option) (tree, flat string) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	obs, err := dlockotel.NewObserver(append(opts, dlockotel.WithTracerProvider(tp))...)
	if err != nil {
		t.Fatal(err)
	}
	tree = spanTree(t, tp, exp, obs)
	exp.Reset()
	return tree, spanTree(t, tp, exp, dlock.ObserverFunc(obs.Event))
}
