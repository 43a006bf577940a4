package cmp

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// OpenPlan is the open-loop comparison on one store: each peer's saturated
// throughput (a closed loop of 2 processes on one key) and dlock's (to
// show what share of it the rates are), then dlock and the
// best peer offered a Poisson load at Fractions of it, from 2 processes on
// one key, the two taking turns in Rounds rounds.
type OpenPlan struct {
	Dlock     string
	Peers     []string  // the best of them (most saturated ops/s) sets the rates
	Fractions []float64 // of the best peer's saturated throughput: 0.5, 0.8
	Rounds    int
	Seed      uint64
	Procs     int // processes the load comes from (the rate is split evenly)
	// Saturate measures lib's saturated throughput, in critical sections
	// per second.
	Saturate func(lib string) (float64, error)
	// Run offers a (a.Rate per process) to lib and merges the processes'
	// tallies.
	Run func(lib string, a Arrivals) (*Tally, error)
}

// OpenRow is one library at one offered rate, merged over the rounds, and
// its whole-section p99 in each round.
type OpenRow struct {
	Lib      string
	Fraction float64
	Rate     float64 // total over the processes, per second
	Offered  int     // requests scheduled, all rounds
	T        Tally
	P99s     []time.Duration
}

// Play runs p and writes its Markdown report to w; it returns the rows,
// the libraries in the order dlock, best peer, for each fraction. It stops
// at the first error.
func (p OpenPlan) Play(w io.Writer) ([]OpenRow, error) {
	best, bestOps := "", 0.0
	var sat []string
	for _, lib := range p.Peers {
		ops, err := p.Saturate(lib)
		if err != nil {
			return nil, fmt.Errorf("saturate %s: %w", lib, err)
		}
		sat = append(sat, fmt.Sprintf("%s %.0f/s", lib, ops))
		if ops > bestOps {
			best, bestOps = lib, ops
		}
	}
	if best == "" {
		return nil, fmt.Errorf("no peer reached a throughput")
	}
	own, err := p.Saturate(p.Dlock)
	if err != nil {
		return nil, fmt.Errorf("saturate %s: %w", p.Dlock, err)
	}
	var of []string
	for _, f := range p.Fractions {
		of = append(of, fmt.Sprintf("%.0f %%", 100*f*bestOps/max(own, 1)))
	}
	fmt.Fprintf(w, "open loop: Poisson arrivals from %d processes on one key, seed %d; saturated throughput (closed loop): %s; rates from %s's; "+
		"%s's own: %.0f/s, so the rates offered are %s of it\n\n", p.Procs, p.Seed, strings.Join(sat, ", "), best, p.Dlock, own, strings.Join(of, " and "))
	libs := []string{p.Dlock, best}
	var rows []OpenRow
	for _, f := range p.Fractions {
		rate := f * bestOps
		pair := []OpenRow{{Lib: libs[0], Fraction: f, Rate: rate}, {Lib: libs[1], Fraction: f, Rate: rate}}
		for round := range max(p.Rounds, 1) {
			a := Arrivals{Rate: rate / float64(p.Procs), Seed: p.Seed + uint64(round)}
			_, err := Alternate(libs, round, func(lib string) (struct{}, error) {
				t, err := p.Run(lib, a)
				if err != nil {
					return struct{}{}, fmt.Errorf("%s at %.0f/s: %w", lib, rate, err)
				}
				if t.Overlaps > 0 {
					return struct{}{}, fmt.Errorf("%s at %.0f/s: %d critical sections overlapped another", lib, rate, t.Overlaps)
				}
				r := &pair[slices.Index(libs, lib)]
				r.P99s = append(r.P99s, QuantilesOf(t.Lat).P99)
				r.Offered += len(t.Lat)
				r.T.Merge(t)
				return struct{}{}, nil
			})
			if err != nil {
				return nil, err
			}
		}
		rows = append(rows, pair...)
	}
	WriteOpen(w, rows)
	return rows, nil
}

// WriteOpen writes rows (pairs: dlock, then the peer, at one rate) as a
// Markdown table, and each pair's p99 ratio round by round against the
// target (dlock's p99 at most 0.2× the peer's).
func WriteOpen(w io.Writer, rows []OpenRow) {
	fmt.Fprintln(w, "| offered | library | done | late | failed | wait p50 | p99 | p99.9 | whole p50 | p99 | p99.9 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		wq, lq := QuantilesOf(r.T.Wait), QuantilesOf(r.T.Lat)
		fmt.Fprintf(w, "| %.0f %% (%.0f/s) | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |\n", r.Fraction*100, r.Rate, r.Lib,
			r.T.Ops, r.T.Late, r.T.Failures, MS(wq.P50), MS(wq.P99), MS(wq.P999), MS(lq.P50), MS(lq.P99), MS(lq.P999))
	}
	fmt.Fprintln(w)
	for i := 0; i+1 < len(rows); i += 2 {
		d, o := rows[i], rows[i+1]
		var rs []string
		met := true
		for k := range min(len(d.P99s), len(o.P99s)) {
			ratio := float64(d.P99s[k]) / float64(max(o.P99s[k], 1))
			rs = append(rs, fmt.Sprintf("%.3f×", ratio))
			met = met && ratio <= 0.2
		}
		fmt.Fprintf(w, "- at %.0f %%: %s's whole-section p99 ÷ %s's, round by round: %s (target ≤ 0.2×: %s)\n",
			d.Fraction*100, d.Lib, o.Lib, strings.Join(rs, ", "), Yes(met))
	}
}

// OpenFlags are the open-loop flags every comparison shares.
type OpenFlags struct {
	On   bool   // -open: run the open-loop comparison instead of the scenarios
	Seed uint64 // -seed: the arrivals' seed (0: from the clock, printed)
}

// Register defines -open and -seed on fs.
func (o *OpenFlags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&o.On, "open", false, "latency under offered load: Poisson arrivals from 2 processes on one key at 50 % and 80 % of the best peer's saturated throughput (-duration per turn, -rounds rounds)")
	fs.Uint64Var(&o.Seed, "seed", 0, "-open: the arrivals' seed (0: from the clock; printed)")
}

// SeedOrClock is o.Seed, or the clock's nanoseconds if it is 0.
func (o OpenFlags) SeedOrClock() uint64 {
	if o.Seed != 0 {
		return o.Seed
	}
	return uint64(time.Now().UnixNano())
}
