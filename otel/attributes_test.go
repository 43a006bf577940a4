package dlockotel_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"example.com/dlock"
	"example.com/dlock/memstore"
	dlockotel "example.com/dlock/otel"
)

// holdsKey reports whether strs (key, value pairs) hold a dlock.key.
func holdsKey(strs []string) bool {
	for i := 0; i+1 < len(strs); i++ {
		if strs[i] == string(dlockotel.AttrKey) {
			return true
		}
	}
	return false
}

// By default no metric point and no span has the key; with
// WithKeyAttribute every metric point and every dlock span has it, in
// either shape.
func TestKeyOnlyWithOption(t *testing.T) {
	s := newSink()
	lockLife(t, s, s.observer(t), nil)
	ms, ss := s.strings(t)
	if holdsKey(ms) || holdsKey(ss) {
		t.Fatalf("the key is recorded by default:\n%s", dumpMetrics(s.metrics(t)))
	}

	for _, shape := range []struct {
		opts  []dlockotel.Option
		spans int
	}{
		{nil, 3}, // 3 calls, their waits and holds as events
		{[]dlockotel.Option{dlockotel.WithChildSpans()}, 8}, // 3 calls, 3 waits, 2 holds
	} {
		s = newSink()
		lockLife(t, s, s.observer(t, append(shape.opts, dlockotel.WithKeyAttribute())...), nil)
		for name, ps := range s.metrics(t) {
			for _, p := range ps {
				if v, ok := p.attrs.Value(dlockotel.AttrKey); !ok || !strings.HasPrefix(v.AsString(), "orders/4") {
					t.Errorf("with WithKeyAttribute, a point of %s has no key: %v", name, p.attrs.ToSlice())
				}
			}
		}
		var spans int
		for _, sp := range s.spans.Ended() {
			if strings.HasPrefix(sp.Name(), "dlock.") {
				spans++
				if k := attr(sp, dlockotel.AttrKey); !strings.HasPrefix(k, "orders/4") {
					t.Errorf("with WithKeyAttribute, a %s span has key %q", sp.Name(), k)
				}
			}
		}
		if spans != shape.spans {
			t.Errorf("%d dlock spans, want %d", spans, shape.spans)
		}
		find(t, s.metrics(t), dlockotel.MetricLost, dlockotel.AttrKind.String("lock"),
			dlockotel.AttrCause.String("taken"), dlockotel.AttrKey.String("orders/43"))
	}
}

// leaked returns the tokens that one of strs contains.
func leaked(strs, tokens []string) []string {
	var found []string
	for _, tok := range tokens {
		for _, s := range strs {
			if strings.Contains(s, tok) {
				found = append(found, tok)
				break
			}
		}
	}
	return found
}

// errTokenObserver passes every event and call to o, and after a loss a
// failed wait and a loss whose errors' text holds the event's token: the
// Observer must not record an error's text.
func errTokenObserver(o *dlockotel.Observer, tokens *[]string) dlock.Observer {
	return errTokens{o, tokens}
}

type errTokens struct {
	o      *dlockotel.Observer
	tokens *[]string
}

func (et errTokens) BeginCall(ctx context.Context, c dlock.Call) context.Context {
	return et.o.BeginCall(ctx, c)
}

func (et errTokens) Event(ctx context.Context, e dlock.Event) {
	et.o.Event(ctx, e)
	if e.Type == dlock.EventLost {
		tok := rand.Text()
		*et.tokens = append(*et.tokens, tok)
		err := fmt.Errorf("store said: token %s is not the owner", tok)
		et.o.Event(ctx, dlock.Event{Type: dlock.EventWaitEnd, Kind: e.Kind, Key: e.Key, Outcome: dlock.OutcomeRefused, Err: err})
	}
}

// No metric attribute and no span (name, attribute, event, status) holds
// an owner token, with the key recorded or not, even when an error's text
// holds one, in either shape. Negative control: an observer that passes the token as the
// key is caught, in the metrics and in the spans.
func TestTokenNeverRecorded(t *testing.T) {
	for _, opts := range [][]dlockotel.Option{nil, {dlockotel.WithKeyAttribute()},
		{dlockotel.WithChildSpans(), dlockotel.WithKeyAttribute()}} {
		s := newSink()
		var errTokens []string
		lf := lockLife(t, s, errTokenObserver(s.observer(t, opts...), &errTokens), nil)
		tokens := append(lf.tokens, errTokens...)
		if len(tokens) != 3 {
			t.Fatalf("the scenario used %d tokens, want 3", len(tokens))
		}
		ms, ss := s.strings(t)
		if found := append(leaked(ms, tokens), leaked(ss, tokens)...); len(found) > 0 {
			t.Fatalf("tokens recorded (options %d): %v", len(opts), found)
		}
	}

	s := newSink()
	o := s.observer(t, dlockotel.WithKeyAttribute())
	var tok string
	leaky := dlock.ObserverFunc(func(ctx context.Context, e dlock.Event) {
		if e.Type == dlock.EventWaitEnd && e.Outcome == dlock.OutcomeAcquired && tok == "" {
			tok = rand.Text()
		}
		if tok != "" {
			e.Key = tok // every event from the first grant on
		}
		o.Event(ctx, e)
	})
	lockLife(t, s, leaky, nil)
	ms, ss := s.strings(t)
	if len(leaked(ms, []string{tok})) != 1 || len(leaked(ss, []string{tok})) != 1 {
		t.Fatalf("control: a token passed as the key was not found in the metrics (%v) and the spans (%v)",
			leaked(ms, []string{tok}), leaked(ss, []string{tok}))
	}
}

// A write holding downgraded to read and released counts as write from
// its grant to its end, although its release is of kind read: the held
// counter of write returns to 0 and read's is never moved.
func TestDowngradedHoldingCountsAsWrite(t *testing.T) {
	s := newSink()
	synctest.Test(t, func(t *testing.T) {
		rw, err := dlock.NewRWLocks(memstore.New(nil), dlock.WithObserver(s.observer(t)))
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close(context.Background())
		ctx := context.Background()
		h, err := rw.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Downgrade(ctx); err != nil {
			t.Fatal(err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	ms := s.metrics(t)
	if p := find(t, ms, dlockotel.MetricHeld, dlockotel.AttrKind.String("write")); p.value != 0 {
		t.Errorf("dlock.held{write} = %g, want 0", p.value)
	}
	for _, p := range ms[dlockotel.MetricHeld] {
		if v, _ := p.attrs.Value(dlockotel.AttrKind); v.AsString() != "write" {
			t.Errorf("dlock.held has a point of kind %q: %g", v.AsString(), p.value)
		}
	}
	if p := find(t, ms, dlockotel.MetricHoldDuration, dlockotel.AttrKind.String("write")); p.count != 1 {
		t.Errorf("write holds: %d, want 1", p.count)
	}
}
