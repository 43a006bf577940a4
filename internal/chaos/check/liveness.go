package check

import (
	"fmt"
	"math"
	"time"

	"example.com/dlock/internal/chaos/history"
)

// Contended is the Err an acquire records when the store answered that
// another owner holds the key: a definite observation that the key was held
// at some moment between the call and its return.
const Contended = "contended"

// holding is what the history says about one token's hold on one key.
type holding struct {
	first   int64 // call of its first acquire (ok or unknown)
	busy    int64 // latest moment the store may still keep the key for it
	holds   int   // ok acquires minus ok releases
	freedAt int64 // return of the ok release that took holds to 0, if last
	renew   bool
	maxTTL  time.Duration
	endRet  int64 // return of its latest release record
}

// Liveness reports refusals that no holding can explain: an acquire refused
// as contended at a moment when every holding of the key had ended (released,
// or past the latest expiry the store could keep for it) by more than slack.
// That is a ghost holding (a key held under a token nobody has, such as the
// one a wait cancelled mid-call leaves behind) or a lease that never ends
// (such as one whose holder's Do panicked and kept renewing). The latest
// expiry of a holding is the return of its last acquire or extend plus its
// TTL; for an automatically renewed lease, the return of its release plus
// its TTL (never, without a release); for an unknown acquire with a Bound,
// its return plus Bound. A final refused probe after the traffic ended turns
// "held forever" into such a refusal.
//
// A request whose reply was lost may reach the store after its call
// returned, and then after the release the library sends in the background
// (Client.Lock documents that the key then stays held until its TTL ends):
// an unknown acquire or extend whose call overlapped a stall (a window in
// which the store applied nothing it was sent, such as a SIGSTOPped server
// or CLIENT PAUSE, and applied it when the window ended), or whose
// Applied time the store recorded after its return, may hold the key until
// the latest such moment plus its TTL, Bound notwithstanding. Without a
// stall or such a record, the bounds above stand: a ghost that no late
// arrival explains is still reported.
func Liveness(ops []history.Op, slack time.Duration, stalls ...Stall) []Violation {
	holders := map[string]map[string]*holding{}
	for _, op := range ops {
		if op.Kind == history.Write || op.Token == "" || op.Err == Contended {
			continue
		}
		hs := holders[op.Key]
		if hs == nil {
			hs = map[string]*holding{}
			holders[op.Key] = hs
		}
		h := hs[op.Token]
		if h == nil {
			if op.Kind != history.Acquire || (op.Outcome != history.Ok && op.Outcome != history.Unknown) {
				continue
			}
			h = &holding{first: op.Call}
			hs[op.Token] = h
		}
		h.add(op, lateApply(op, stalls))
	}
	var out []Violation
	for _, op := range ops {
		if op.Kind != history.Acquire || op.Outcome != history.Failed || op.Err != Contended {
			continue
		}
		last, explained := int64(math.MinInt64), false
		for tok, h := range holders[op.Key] {
			if tok == op.Token || h.first > op.Return {
				continue
			}
			end := h.end()
			if end+int64(slack) >= op.Call {
				explained = true
				break
			}
			last = max(last, end)
		}
		if !explained {
			msg := fmt.Sprintf("key %q refused while no holding could exist", op.Key)
			if last != math.MinInt64 {
				msg += fmt.Sprintf(": the last one ended %v before", time.Duration(op.Call-last).Round(time.Millisecond))
			}
			out = append(out, Violation{Check: "liveness", Msg: msg + " (a ghost holding or a lease that never ends)", Ops: []history.Op{op}})
		}
	}
	return out
}

// Stall is a window [From, To] (CLOCK_MONOTONIC ns) in which the store held
// the requests it was sent and applied them at To at the earliest.
type Stall struct {
	From, To int64
}

// lateApply is the latest moment op, an unknown acquire or extend, may have
// been applied by the store if that is known to be after its return (a
// stall its call overlapped, or the store's record), else 0.
func lateApply(op history.Op, stalls []Stall) int64 {
	if op.Outcome != history.Unknown || (op.Kind != history.Acquire && op.Kind != history.Extend) {
		return 0
	}
	late := op.Applied
	for _, s := range stalls {
		if s.From <= op.Return && s.To >= op.Call {
			late = max(late, s.To)
		}
	}
	if late <= op.Return {
		return 0
	}
	return late
}

// add folds one of the holding's ops in; late is op's late application
// (lateApply), 0 if none.
func (h *holding) add(op history.Op, late int64) {
	h.renew = h.renew || op.Renew
	switch {
	case op.Kind == history.Release:
		h.endRet = max(h.endRet, op.Return)
		h.freedAt = 0
		if op.Outcome == history.Ok {
			h.holds--
			if h.holds <= 0 {
				h.freedAt = op.Return
			}
		}
	case op.Outcome == history.Ok || op.Outcome == history.Unknown:
		h.maxTTL = max(h.maxTTL, op.TTL)
		h.freedAt = 0
		sets := op.Return + int64(op.TTL)
		switch {
		case late != 0:
			sets = late + int64(op.TTL) // its release may have come first
		case op.Outcome == history.Unknown && op.Bound > 0:
			sets = op.Return + int64(op.Bound)
		}
		h.busy = max(h.busy, sets)
		if op.Kind == history.Acquire && op.Outcome == history.Ok {
			h.holds++
		}
	}
}

// end is the latest moment the store may keep the key for the holding.
func (h *holding) end() int64 {
	if h.freedAt != 0 {
		return h.freedAt
	}
	if !h.renew {
		return h.busy
	}
	if h.endRet == 0 {
		return math.MaxInt64 - int64(time.Hour) // renewed until released: no release yet
	}
	return max(h.busy, h.endRet+int64(h.maxTTL))
}
