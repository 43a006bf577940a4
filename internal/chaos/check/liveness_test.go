package check

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/chaos/history"
)

// refused is B's acquire refused as contended over [call, call+1] ms.
func refused(call int64) history.Op {
	o := op(1, history.Acquire, "B", history.Failed, call, call+1)
	o.Err = Contended
	return o
}

func TestLivenessExplainedRefusalsPass(t *testing.T) {
	unknown := op(2, history.Acquire, "G", history.Unknown, 0, 5)
	renewed := acq(0, "R", 1, 0, 1)
	renewed.Renew = true
	for name, ops := range map[string][]history.Op{
		"held":                    {acq(0, "A", 1, 0, 1), refused(50)},
		"re-entered, one release": {acq(0, "A", 1, 0, 1), acq(0, "A", 1, 2, 3), op(0, history.Release, "A", history.Ok, 10, 11), refused(50)},
		"unknown acquire in TTL":  {unknown, refused(80)},
		"renewed, not released":   {renewed, refused(10_000)},
		"release unknown, in TTL": {acq(0, "A", 1, 0, 1), op(0, history.Release, "A", history.Unknown, 10, 11), refused(90)},
	} {
		if v := Liveness(ops, 10*time.Millisecond); len(v) != 0 {
			t.Errorf("%s: %v", name, v)
		}
	}
}

func TestLivenessDetectsGhostsAndEndlessLeases(t *testing.T) {
	bounded := op(2, history.Acquire, "G", history.Unknown, 0, 5)
	bounded.Bound = 20 * time.Millisecond
	renewed := acq(0, "R", 1, 0, 1)
	renewed.Renew = true
	for name, ops := range map[string][]history.Op{
		"after release":                {acq(0, "A", 1, 0, 1), op(0, history.Release, "A", history.Ok, 50, 51), refused(70)},
		"after TTL, no release":        {acq(0, "A", 1, 0, 1), refused(200)},
		"unknown acquire past its TTL": {op(2, history.Acquire, "G", history.Unknown, 0, 5), refused(200)},
		"cancelled wait past Bound":    {bounded, refused(80)},
		"renewed lease released":       {renewed, op(0, history.Release, "R", history.Ok, 100, 101), refused(1000)},
		"nobody ever held it":          {refused(10)},
	} {
		v := Liveness(ops, 10*time.Millisecond)
		if len(v) != 1 || v[0].Check != "liveness" || !strings.Contains(v[0].Msg, "no holding") {
			t.Errorf("%s: want one liveness violation, got %v", name, v)
		}
	}
}

// A request that reached the store late (held by a stalled server, or
// recorded by the store after its call returned) may hold the key until
// that moment plus its TTL, since its release may have come first; a stall
// or record that does not reach past the call's return excuses nothing, so
// that a ghost with no late arrival to explain it (L1) is still caught.
func TestLivenessLateArrival(t *testing.T) {
	unknown := op(2, history.Acquire, "G", history.Unknown, 0, 5) // TTL 100 ms
	bounded := unknown
	bounded.Bound = 20 * time.Millisecond
	late := bounded
	late.Applied = 60 * ms
	early := bounded
	early.Applied = 3 * ms // applied before its return: its release came after it
	stall := Stall{From: 2 * ms, To: 400 * ms}
	for name, c := range map[string]struct {
		ops    []history.Op
		stalls []Stall
		want   int
	}{
		"unknown acquire in a stall, refused after it":        {[]history.Op{unknown, refused(450)}, []Stall{stall}, 0},
		"unknown acquire in a stall, refused past TTL after":  {[]history.Op{unknown, refused(520)}, []Stall{stall}, 1},
		"stall before the call":                               {[]history.Op{op(2, history.Acquire, "G", history.Unknown, 500, 505), refused(700)}, []Stall{stall}, 1},
		"stall after the return":                              {[]history.Op{unknown, refused(450)}, []Stall{{From: 10 * ms, To: 400 * ms}}, 1},
		"cancelled wait applied late":                         {[]history.Op{late, refused(150)}, nil, 0},
		"cancelled wait applied late, refused past TTL after": {[]history.Op{late, refused(180)}, nil, 1},
		"cancelled wait applied before its return (L1)":       {[]history.Op{early, refused(80)}, nil, 1},
		"cancelled wait in a stall":                           {[]history.Op{bounded, refused(450)}, []Stall{stall}, 0},
		"ok acquire in a stall, released: the stall is moot":  {[]history.Op{acq(0, "A", 1, 3, 4), op(0, history.Release, "A", history.Ok, 410, 411), refused(450)}, []Stall{stall}, 1},
		"ghost in a stall, refused long after":                {[]history.Op{bounded, refused(10_000)}, []Stall{stall}, 1},
	} {
		if v := Liveness(c.ops, 10*time.Millisecond, c.stalls...); len(v) != c.want {
			t.Errorf("%s: want %d violations, got %v", name, c.want, v)
		}
	}
}

// The latest validity a lease recorded counts: an Extend that moved it back
// shortens the window, and a lease that claims the longer one (S1) overlaps.
func TestMutualExclusionFollowsLatestValidity(t *testing.T) {
	ext := op(0, history.Extend, "A", history.Ok, 10, 11)
	ext.ValidUntil = 30 * ms
	b := acq(1, "B", 2, 40, 41)
	if v := MutualExclusion([]history.Op{acq(0, "A", 1, 0, 1), ext, b}); len(v) != 0 {
		t.Fatalf("window not moved back by the shorter extend: %v", v)
	}
	ext.ValidUntil = 97 * ms // the lease kept its longer validity
	if v := MutualExclusion([]history.Op{acq(0, "A", 1, 0, 1), ext, b}); len(v) != 1 {
		t.Fatalf("want one overlap, got %v", v)
	}
}

// A grant whose fence its client could not see (Do) is recorded with fence
// 0: neither a fence violation nor illegal for the model.
func TestUnobservedFenceIsNotChecked(t *testing.T) {
	ops := []history.Op{acq(0, "A", 0, 0, 1), op(0, history.Release, "A", history.Ok, 10, 11), acq(1, "B", 1, 20, 21), op(1, history.Release, "B", history.Ok, 30, 31), acq(2, "C", 0, 40, 41)}
	if v := FenceOrder(ops); len(v) != 0 {
		t.Fatalf("fence order: %v", v)
	}
	if err := Linearizable(ops, time.Millisecond, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A wait cancelled mid-call whose holding the library gives back (Bound)
// may end at any moment: a refusal while it held the key and a grant soon
// after are both legal. Without the promise the grant within its TTL is not.
func TestLinearizableBoundedGhostMayEndEarly(t *testing.T) {
	ghost := op(2, history.Acquire, "G", history.Unknown, 0, 5)
	ghost.Bound = 20 * time.Millisecond
	ops := []history.Op{ghost, refused(10), acq(1, "B", 1, 30, 31)}
	if err := Linearizable(ops, time.Millisecond, 10*time.Second); err != nil {
		t.Fatalf("given-back holding: %v", err)
	}
	ops[0].Bound = 0
	if err := Linearizable(ops, time.Millisecond, 10*time.Second); err == nil {
		t.Fatal("a holding kept until its TTL allowed a grant within it")
	}
}
