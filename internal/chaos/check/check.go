// Package check validates lock histories recorded by package history:
// mutual exclusion of validity windows, fence order, linearizability against a
// lock model (with porcupine), and no lost update on a protected counter.
//
// Every checker returns the violations it found; an empty result is a pass.
// Each is unit-tested on hand-made histories that must fail, so that a pass
// means something.
package check

import (
	"fmt"
	"sort"

	"example.com/dlock/internal/chaos/history"
)

// Violation is one broken invariant, with the operations that show it.
type Violation struct {
	Check string
	Msg   string
	Ops   []history.Op
}

func (v Violation) String() string {
	s := v.Check + ": " + v.Msg
	for _, op := range v.Ops {
		s += "\n    " + op.String()
	}
	return s
}

// window is the interval in which a client believed it held a key.
type window struct {
	key, token  string
	start, end  int64
	endAt       int64 // Return of the record that set end
	acquire     history.Op
	releaseCall int64
}

// windows builds one window per (key, token) from the ok acquires: from the
// first grant's return to the validity of the latest record that states one
// (acquire or extend ok, release), truncated at the last release call. The
// latest record counts, not the largest validity: a lease whose validity
// was moved back (an Extend shorter than the lease) no longer claims the
// longer one. Re-entrant leases share the token; the outer lease's release
// comes last, so its validity is the holding's.
func windows(ops []history.Op) []window {
	type id struct{ key, token string }
	byID := map[id]*window{}
	var order []id
	for _, op := range ops {
		k := id{op.Key, op.Token}
		w := byID[k]
		if op.Kind == history.Acquire && op.Outcome == history.Ok && w == nil {
			w = &window{key: op.Key, token: op.Token, start: op.Return, acquire: op}
			byID[k] = w
			order = append(order, k)
		}
		if w == nil {
			continue
		}
		states := op.Outcome == history.Ok && (op.Kind == history.Acquire || op.Kind == history.Extend) ||
			op.Kind == history.Release
		if states && op.ValidUntil != 0 && op.Return >= w.endAt {
			w.end, w.endAt = op.ValidUntil, op.Return
		}
		if op.Kind == history.Release {
			w.releaseCall = max(w.releaseCall, op.Call)
		}
	}
	out := make([]window, 0, len(order))
	for _, k := range order {
		w := *byID[k]
		if w.releaseCall > 0 && w.releaseCall < w.end {
			w.end = w.releaseCall
		}
		out = append(out, w)
	}
	return out
}

// MutualExclusion reports every pair of validity windows of one key, held by
// different tokens, that overlap. Acquires with an unknown outcome are not
// windows: their client never used them.
func MutualExclusion(ops []history.Op) []Violation {
	ws := windows(ops)
	sort.Slice(ws, func(i, j int) bool { return ws[i].start < ws[j].start })
	var out []Violation
	open := map[string][]window{} // per key, windows that may still overlap
	for _, w := range ws {
		live := open[w.key][:0:0]
		for _, o := range open[w.key] {
			if o.end <= w.start {
				continue
			}
			live = append(live, o)
			if o.token != w.token {
				out = append(out, Violation{Check: "mutual-exclusion", Msg: fmt.Sprintf(
					"key %q held by two owners for %v", w.key, nsDur(min(o.end, w.end)-w.start)),
					Ops: []history.Op{o.acquire, w.acquire}})
			}
		}
		open[w.key] = append(live, w)
	}
	return out
}

// FenceOrder reports grants of one key to different tokens whose fences do
// not increase in real-time order (A returned before B was invoked, but
// fence(A) >= fence(B)) or are equal. Re-entrant grants (same token) must
// repeat the fence. Grants whose fence the client could not observe (0) are
// skipped.
func FenceOrder(ops []history.Op) []Violation {
	first := map[[2]string]history.Op{}
	var grants []history.Op
	var out []Violation
	for _, op := range ops {
		if op.Kind != history.Acquire || op.Outcome != history.Ok || op.Fence == 0 {
			continue
		}
		id := [2]string{op.Key, op.Token}
		if f, ok := first[id]; ok {
			if f.Fence != op.Fence {
				out = append(out, Violation{Check: "fence-order", Msg: "re-entrant grant changed the fence", Ops: []history.Op{f, op}})
			}
			continue
		}
		first[id] = op
		grants = append(grants, op)
	}
	for i, a := range grants {
		for _, b := range grants[i+1:] {
			if a.Key != b.Key {
				continue
			}
			switch {
			case a.Fence == b.Fence:
				out = append(out, Violation{Check: "fence-order", Msg: "two holdings share a fence", Ops: []history.Op{a, b}})
			case a.Return < b.Call && a.Fence > b.Fence, b.Return < a.Call && b.Fence > a.Fence:
				out = append(out, Violation{Check: "fence-order", Msg: "fence went backwards", Ops: []history.Op{a, b}})
			}
		}
	}
	return out
}

// AcceptedWrites reports fenced writes to one resource accepted out of fence
// order: a write accepted after (in real time) another accepted write with a
// higher fence. That is a stale holder's write getting through.
func AcceptedWrites(ops []history.Op) []Violation {
	var ws []history.Op
	for _, op := range ops {
		if op.Kind == history.Write && op.Outcome == history.Ok {
			ws = append(ws, op)
		}
	}
	var out []Violation
	for i, a := range ws {
		for _, b := range ws[i+1:] {
			if a.Key == b.Key && a.Return < b.Call && b.Fence < a.Fence {
				out = append(out, Violation{Check: "fenced-write", Msg: "stale fence accepted after a newer one", Ops: []history.Op{a, b}})
			}
		}
	}
	return out
}

// Stock checks the seed's inventory scenario: the counter went from initial
// to final by ok writes, each writing the value it read minus one. It reports
// lost updates (more successful decrements than the stock went down, or two
// writes of one value), writes reported as failed that landed (the stock went
// down by more than the ok and unknown writes), a negative stock, and
// duplicate request ids. Writes with an unknown outcome may or may not have
// happened.
func Stock(initial, final int64, ops []history.Op) []Violation {
	var out []Violation
	seenReq := map[string]history.Op{}
	seenVal := map[int64]history.Op{}
	var okN, unknownN int64
	for _, op := range ops {
		if op.Kind != history.Write || (op.Outcome != history.Ok && op.Outcome != history.Unknown) {
			continue
		}
		if op.Outcome == history.Unknown {
			unknownN++
			continue
		}
		okN++
		if op.Value < 0 {
			out = append(out, Violation{Check: "stock", Msg: "stock written below zero", Ops: []history.Op{op}})
		}
		if p, dup := seenReq[op.ReqID]; dup {
			out = append(out, Violation{Check: "stock", Msg: "request id counted twice", Ops: []history.Op{p, op}})
		}
		seenReq[op.ReqID] = op
		if p, dup := seenVal[op.Value]; dup {
			out = append(out, Violation{Check: "stock", Msg: fmt.Sprintf("lost update: value %d written twice", op.Value), Ops: []history.Op{p, op}})
		}
		seenVal[op.Value] = op
	}
	if final < 0 {
		out = append(out, Violation{Check: "stock", Msg: fmt.Sprintf("final stock %d below zero", final)})
	}
	switch down := initial - final; {
	case down < okN:
		out = append(out, Violation{Check: "stock", Msg: fmt.Sprintf(
			"lost update: %d successful decrements (+%d unknown) but stock went down by %d", okN, unknownN, down)})
	case down > okN+unknownN:
		out = append(out, Violation{Check: "stock", Msg: fmt.Sprintf(
			"a write reported as not made landed: %d successful decrements (+%d unknown) but stock went down by %d", okN, unknownN, down)})
	}
	return out
}

func nsDur(ns int64) string { return fmt.Sprint(ns/1e6, "ms") }
