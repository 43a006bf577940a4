package dlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// callMark is the value a callRecorder's BeginCall puts in the call's
// context.
type callMark struct{}

// callRecorder is a CallObserver that writes, in order, each BeginCall
// ("begin Name kind key") and each event, with the call's mark if the
// event's context carries one ("wait.start <- Lock#1").
type callRecorder struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func (r *callRecorder) BeginCall(ctx context.Context, c dlock.Call) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	mark := fmt.Sprintf("%s#%d", c.Name, r.n)
	r.lines = append(r.lines, fmt.Sprintf("begin %s %s %s", c.Name, c.Kind, c.Key))
	return context.WithValue(ctx, callMark{}, mark)
}

func (r *callRecorder) Event(ctx context.Context, e dlock.Event) {
	r.note(ctx, string(e.Type))
}

// note records what with the mark of ctx.
func (r *callRecorder) note(ctx context.Context, what string) {
	mark, _ := ctx.Value(callMark{}).(string)
	r.mu.Lock()
	r.lines = append(r.lines, what+" <- "+mark)
	r.mu.Unlock()
}

func (r *callRecorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := strings.Join(r.lines, "\n")
	r.lines = nil
	return s
}

// A CallObserver is asked once per observed call, before its wait.start,
// and the context it returns is the one the call's wait events, its
// holding's end (for Do, RDo) and Do's function see. A call rejected before
// any I/O asks nothing. Control: the same observer hidden behind an
// ObserverFunc (a plain Observer) is not asked and its events carry no
// mark.
func TestCallObserverGivesTheCallItsContext(t *testing.T) {
	ctx := testCtx(t)
	rec := &callRecorder{}
	c := newClientOnStore(t, memstore.New(nil), dlock.WithObserver(rec))
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if _, err := c.TryLock(ctx, ""); err == nil {
		t.Fatal("TryLock of an empty key succeeded")
	}
	_ = c.Do(ctx, "k", func(fctx context.Context) error {
		rec.note(fctx, "fn")
		return nil
	})
	want := `begin Lock lock k
wait.start <- Lock#1
wait.end <- Lock#1
released <- 
begin Do lock k
wait.start <- Do#2
wait.end <- Do#2
fn <- Do#2
released <- Do#2`
	if got := rec.take(); got != want {
		t.Errorf("client calls:\n%s\nwant:\n%s", got, want)
	}

	rw := newRWLocks(t, memstore.New(nil), dlock.WithObserver(rec))
	_ = rw.RDo(ctx, "r", func(fctx context.Context) error { rec.note(fctx, "fn"); return nil })
	sems := newSems(t, memstore.New(nil), dlock.WithObserver(rec))
	if _, err := sems.TryAcquire(ctx, "s", 2, 3); err == nil {
		t.Fatal("TryAcquire of 3 permits of 2 succeeded")
	}
	p, err := sems.TryAcquire(ctx, "s", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(ctx)
	want = `begin RDo read r
wait.start <- RDo#3
wait.end <- RDo#3
fn <- RDo#3
released <- RDo#3
begin TryAcquire permit s
wait.start <- TryAcquire#4
wait.end <- TryAcquire#4
released <- `
	if got := rec.take(); got != want {
		t.Errorf("family calls:\n%s\nwant:\n%s", got, want)
	}

	plain := newClientOnStore(t, memstore.New(nil), dlock.WithObserver(dlock.ObserverFunc(rec.Event)))
	_ = plain.Do(ctx, "k", func(fctx context.Context) error { rec.note(fctx, "fn"); return nil })
	want = "wait.start <- \nwait.end <- \nfn <- \nreleased <- "
	if got := rec.take(); got != want {
		t.Errorf("a plain Observer (control):\n%s\nwant:\n%s", got, want)
	}
}

// A Limiter's WaitN is a call too.
func TestCallObserverSeesLimiterWait(t *testing.T) {
	rec := &callRecorder{}
	l := newLimiter(t, memstore.New(nil), dlock.RateLimit{Rate: 10, Period: time.Second, Burst: 1},
		dlock.WithLimiterObserver(rec))
	if err := l.Wait(testCtx(t), "k"); err != nil {
		t.Fatal(err)
	}
	want := "begin Wait limit k\nwait.start <- Wait#1\nlimit.decision <- Wait#1\nwait.end <- Wait#1"
	if got := rec.take(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
