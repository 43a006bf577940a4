package check

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/chaos/history"
)

const ms = int64(time.Millisecond)

const ttl = 100 * time.Millisecond

// acq is an ok acquire by token over [call, ret] ms with the validity the
// library would compute (TTL minus drift, from the call).
func acq(client int, tok string, fence uint64, call, ret int64) history.Op {
	return history.Op{Client: client, Kind: history.Acquire, Key: "k", Token: tok, TTL: ttl, Fence: fence,
		Call: call * ms, Return: ret * ms, Outcome: history.Ok, ValidUntil: call*ms + int64(ttl) - 3*ms}
}

func op(client int, kind history.Kind, tok string, out history.Outcome, call, ret int64) history.Op {
	return history.Op{Client: client, Kind: kind, Key: "k", Token: tok, TTL: ttl, Call: call * ms, Return: ret * ms, Outcome: out}
}

// good is a clean history: A holds and releases, B waits (one failed try),
// takes over, and C takes over after B's lease expired without release.
func good() []history.Op {
	return []history.Op{
		acq(0, "A", 1, 0, 1),
		op(1, history.Acquire, "B", history.Failed, 10, 11),
		op(0, history.Release, "A", history.Ok, 50, 51),
		acq(1, "B", 2, 60, 61),
		op(1, history.Extend, "B", history.Ok, 70, 71),
		acq(2, "C", 3, 190, 191),
		op(1, history.Release, "B", history.Failed, 200, 201),
		op(2, history.Release, "C", history.Ok, 210, 211),
	}
}

func TestGoodHistoryPassesEveryCheck(t *testing.T) {
	ops := good()
	if v := MutualExclusion(ops); len(v) != 0 {
		t.Fatalf("mutual exclusion: %v", v)
	}
	if v := FenceOrder(ops); len(v) != 0 {
		t.Fatalf("fence order: %v", v)
	}
	if err := Linearizable(ops, time.Millisecond, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestMutualExclusionDetectsOverlap(t *testing.T) {
	ops := good()
	ops[3] = acq(1, "B", 2, 40, 41) // B granted while A still holds (release at 50)
	v := MutualExclusion(ops)
	if len(v) != 1 || v[0].Check != "mutual-exclusion" {
		t.Fatalf("want one overlap, got %v", v)
	}
	// Truncation at release: the same grant after A's release call is fine.
	ops[3] = acq(1, "B", 2, 50, 52)
	if v := MutualExclusion(ops); len(v) != 0 {
		t.Fatalf("window not truncated at release: %v", v)
	}
}

func TestMutualExclusionIgnoresSameOwnerAndUnknown(t *testing.T) {
	ops := []history.Op{acq(0, "A", 1, 0, 1), acq(0, "A", 1, 5, 6), op(1, history.Acquire, "B", history.Unknown, 2, 300)}
	if v := MutualExclusion(ops); len(v) != 0 {
		t.Fatalf("re-entry or an unknown acquire counted as overlap: %v", v)
	}
}

func TestFenceOrderDetectsRegressionAndReuse(t *testing.T) {
	for name, fence := range map[string]uint64{"backwards": 1, "equal": 2} {
		ops := good()
		ops[0].Fence = 2
		ops[3].Fence = fence
		if v := FenceOrder(ops); len(v) == 0 {
			t.Errorf("%s: fence %d after 2 not reported", name, fence)
		}
	}
	ops := []history.Op{acq(0, "A", 1, 0, 1), acq(0, "A", 2, 5, 6)}
	if v := FenceOrder(ops); len(v) != 1 {
		t.Errorf("re-entry with a new fence: %v", v)
	}
}

func TestLinearizableDetectsIllegalHistories(t *testing.T) {
	cases := map[string]func([]history.Op) []history.Op{
		"grant while held": func(h []history.Op) []history.Op {
			h[3] = acq(1, "B", 2, 20, 21) // before A's release and its expiry
			return h
		},
		"fence backwards": func(h []history.Op) []history.Op { h[5].Fence = 2; return h },
		"release by non-owner": func(h []history.Op) []history.Op {
			return append(h[:1:1], op(1, history.Release, "B", history.Ok, 10, 11))
		},
		"contended while free": func(h []history.Op) []history.Op {
			return []history.Op{op(0, history.Acquire, "A", history.Failed, 0, 1)}
		},
		"extend after takeover": func(h []history.Op) []history.Op {
			return append(h, op(0, history.Extend, "A", history.Ok, 220, 221))
		},
	}
	for name, mutate := range cases {
		if err := Linearizable(mutate(good()), time.Millisecond, 10*time.Second); err == nil {
			t.Errorf("%s: history accepted", name)
		}
	}
}

func TestLinearizableUnknownAcquireMayHold(t *testing.T) {
	// A's acquire timed out: it may hold, so B's contended failure is legal;
	// once A's possible TTL is over, B gets it.
	ops := []history.Op{
		op(0, history.Acquire, "A", history.Unknown, 0, 0),
		op(1, history.Acquire, "B", history.Failed, 10, 11),
		acq(1, "B", 2, 150, 151),
	}
	if err := Linearizable(ops, time.Millisecond, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestLinearizableTimeoutIsFailure(t *testing.T) {
	var ops []history.Op
	for i := range 60 {
		ops = append(ops, op(i, history.Acquire, string(rune('A'+i)), history.Unknown, int64(i), 0))
	}
	ops = append(ops, op(99, history.Acquire, "Z", history.Failed, 100, 101))
	err := Linearizable(ops, time.Millisecond, time.Nanosecond)
	if err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("want an unknown result counted as failure, got %v", err)
	}
}

func write(req string, value int64, fence uint64, out history.Outcome, call int64) history.Op {
	return history.Op{Kind: history.Write, Key: "stock", ReqID: req, Value: value, Fence: fence, Call: call * ms, Return: (call + 1) * ms, Outcome: out}
}

func TestStock(t *testing.T) {
	ok := []history.Op{write("r1", 2, 1, history.Ok, 0), write("r2", 1, 2, history.Ok, 10), write("r3", 0, 3, history.Unknown, 20)}
	if v := Stock(3, 1, ok); len(v) != 0 {
		t.Fatalf("clean run: %v", v)
	}
	if v := Stock(3, 0, ok); len(v) != 0 {
		t.Fatalf("unknown write that happened: %v", v)
	}
	bad := map[string]struct {
		final int64
		ops   []history.Op
	}{
		"lost update":  {2, []history.Op{write("r1", 2, 1, history.Ok, 0), write("r2", 2, 2, history.Ok, 10)}},
		"duplicate id": {1, []history.Op{write("r1", 2, 1, history.Ok, 0), write("r1", 1, 2, history.Ok, 10)}},
		"below zero":   {-1, []history.Op{write("r1", 2, 1, history.Ok, 0), write("r2", 1, 2, history.Ok, 1), write("r3", 0, 3, history.Ok, 2), write("r4", -1, 4, history.Ok, 3)}},
		"uncounted":    {0, []history.Op{write("r1", 2, 1, history.Ok, 0)}},
	}
	for name, c := range bad {
		if v := Stock(3, c.final, c.ops); len(v) == 0 {
			t.Errorf("%s: not detected", name)
		}
	}
}

func TestAcceptedWrites(t *testing.T) {
	ok := []history.Op{write("r1", 2, 1, history.Ok, 0), write("r2", 1, 2, history.Ok, 10), write("r3", 0, 1, history.Failed, 20)}
	if v := AcceptedWrites(ok); len(v) != 0 {
		t.Fatalf("clean: %v", v)
	}
	ok[2].Outcome = history.Ok
	if v := AcceptedWrites(ok); len(v) != 1 {
		t.Fatalf("stale write accepted not reported: %v", v)
	}
}
