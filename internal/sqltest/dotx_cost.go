package sqltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"example.com/dlock"
)

// cost is what one call sent: round trips and commits.
type cost struct{ roundTrips, commits int }

// RoundTrips counts what one call of each kind sends, once its statements
// are prepared (each kind runs once first), with one business insert: a
// plain transaction (BEGIN, insert, COMMIT: 3 round trips, 1 commit);
// DoTx folded, which must cost the plain transaction's round trips plus
// two (the record's begin and completion) and one commit; DoTx two-step,
// which must cost two commits (the begin's, then the business
// transaction's: the counter's control, it sees the second commit); a
// folded replay, no commit. The counts are logged.
func RoundTrips(t *testing.T, b Backend) {
	table := b.Table(t)
	g, counter := b.Counted(t, table)
	measure := func(f func() error) cost {
		rt0, c0 := counter.Count(t)
		if err := f(); err != nil {
			t.Fatal(err)
		}
		rt1, c1 := counter.Count(t)
		return cost{rt1 - rt0, c1 - c0}
	}
	self := measure(func() error { return nil }) // what counting itself sends
	run := token()
	calls := []struct {
		name string
		call func(i int) error
	}{
		{"plain transaction", func(i int) error {
			return g.Plain(ctx(t), func(ctx context.Context, tx Tx) error { return tx.Charge(ctx, fmt.Sprint(run, "-plain-", i), 0) })
		}},
		{"DoTx folded", func(i int) error { return charge(ctx(t), g, fmt.Sprint(run, "-folded-", i), Folded) }},
		{"DoTx two-step", func(i int) error { return charge(ctx(t), g, fmt.Sprint(run, "-two-", i), TwoStep) }},
		{"DoTx folded replay", func(i int) error { return charge(ctx(t), g, fmt.Sprint(run, "-folded-", 0), Folded) }},
	}
	got := map[string]cost{}
	for i := range 2 { // the first round prepares the statements
		for _, c := range calls {
			m := measure(func() error { return c.call(i) })
			got[c.name] = cost{m.roundTrips - self.roundTrips, m.commits - self.commits}
		}
	}
	for _, c := range calls {
		t.Logf("%-20s %d round trips, %d commits", c.name, got[c.name].roundTrips, got[c.name].commits)
	}
	plain, folded := got["plain transaction"], got["DoTx folded"]
	if folded.roundTrips != plain.roundTrips+2 || folded.commits != 1 || plain.commits != 1 {
		t.Errorf("folded DoTx: %+v against a plain transaction's %+v; want 2 round trips more and one commit", folded, plain)
	}
	if c := got["DoTx two-step"].commits; c != 2 {
		t.Errorf("control: the two-step DoTx counted %d commits, want 2", c)
	}
	if c := got["DoTx folded replay"].commits; c != 0 {
		t.Errorf("a folded replay counted %d commits, want 0", c)
	}
}

// charge is a DoTx of key in mode that charges once; a replay charges
// nothing.
func charge(c context.Context, g Guard, key string, mode Mode) error {
	_, err := g.DoTx(c, key, "fp", mode, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
		return []byte("ok"), tx.Charge(ctx, key, e.Fence)
	})
	return err
}

// Bench runs one business insert per request, in turn in a plain
// transaction, in DoTx folded and in DoTx two-step (a fresh key each
// time), on the counted instance's pool, and reports each kind's time per
// request (plain-ns/op, folded-ns/op, twostep-ns/op; ns/op is their sum):
// interleaved, so that a machine whose load changes during the run loads
// the three alike. The differences are the guard's cost.
func Bench(b *testing.B, backend Backend) {
	table := backend.Table(b)
	g, _ := backend.Counted(b, table)
	c, run := ctx(b), token() // keys of this run only: -count runs it again on the same table
	kinds := []struct {
		metric string
		call   func(key string) error
	}{
		{"plain-ns/op", func(key string) error {
			return g.Plain(c, func(ctx context.Context, tx Tx) error { return tx.Charge(ctx, key, 0) })
		}},
		{"folded-ns/op", func(key string) error { return charge(c, g, key, Folded) }},
		{"twostep-ns/op", func(key string) error { return charge(c, g, key, TwoStep) }},
	}
	spent := make([]time.Duration, len(kinds))
	n := 0
	for b.Loop() {
		for k, kind := range kinds {
			start := time.Now()
			if err := kind.call(fmt.Sprint(run, "-", n, "-", k)); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(start)
		}
		n++
	}
	for k, kind := range kinds {
		b.ReportMetric(float64(spent[k].Nanoseconds())/float64(n), kind.metric)
	}
}

// token returns a fresh random word.
func token() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
