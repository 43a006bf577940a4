package check

import (
	"sort"
	"time"
)

// Holding is one phase of a read-write holding or a semaphore permit as its
// holder saw it: from Start (its acquisition returned, or the phase began)
// to End (the last instant the holder took it to be valid: its release
// call's start or its ValidUntil, whichever came first). A downgraded write
// holding has two phases with the same ID: write up to the Downgrade call,
// read from then on.
type Holding struct {
	ID      int       // the holding's; shared by its phases
	Client  int       // the client that held it
	Write   bool      // a write phase (read-write locks)
	Permits int       // permits held (semaphores)
	Fence   uint64    // 0 if the holder did not see it (Do, RDo)
	Invoke  time.Time // when its acquisition was called
	Start   time.Time
	End     time.Time
	Note    string // how it was taken, for the report
}

func overlap(a, b Holding) bool { return a.Start.Before(b.End) && b.Start.Before(a.End) }

// WriterOverlaps counts the pairs of holdings of different IDs that
// intersect in time while one of them is a write phase: a writer with
// anyone else inside. Zero for a correct read-write lock.
func WriterOverlaps(hs []Holding) int {
	n := 0
	for i, a := range hs {
		for _, b := range hs[i+1:] {
			if a.ID != b.ID && (a.Write || b.Write) && overlap(a, b) {
				n++
			}
		}
	}
	return n
}

// WriterOverlapPairs returns the pairs WriterOverlaps counts, at most
// max of them, for the report.
func WriterOverlapPairs(hs []Holding, max int) [][2]Holding {
	var out [][2]Holding
	for i, a := range hs {
		for _, b := range hs[i+1:] {
			if len(out) < max && a.ID != b.ID && (a.Write || b.Write) && overlap(a, b) {
				out = append(out, [2]Holding{a, b})
			}
		}
	}
	return out
}

// FenceInversions counts the pairs of holdings where one's acquisition
// returned before the other's was called (so it is earlier in real time)
// and the later one's fence is not greater. With writeOnly, only pairs
// with a write on either side count (a read-write lock's rule: a write's
// fence above every earlier holding's, a read's above every earlier
// write's); without, every pair (a semaphore's rule). Holdings whose fence
// the holder did not see are skipped.
func FenceInversions(hs []Holding, writeOnly bool) int {
	n := 0
	for _, a := range hs {
		for _, b := range hs {
			if a.ID == b.ID || a.Fence == 0 || b.Fence == 0 || !a.Start.Before(b.Invoke) {
				continue
			}
			if (!writeOnly || a.Write || b.Write) && b.Fence <= a.Fence {
				n++
			}
		}
	}
	return n
}

// PermitsOver counts the holdings at whose Start the permits of the
// holdings then valid (this one included) add up to more than limit.
// Zero for a correct semaphore.
func PermitsOver(hs []Holding, limit int) int {
	type event struct {
		at    time.Time
		delta int
	}
	var evs []event
	for _, h := range hs {
		if h.Start.Before(h.End) {
			evs = append(evs, event{h.Start, h.Permits}, event{h.End, -h.Permits})
		}
	}
	// At equal instants an end comes first: a holding ending when another
	// starts does not overlap it.
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].delta < evs[j].delta
		}
		return evs[i].at.Before(evs[j].at)
	})
	n, out := 0, 0
	for _, e := range evs {
		out += e.delta
		if e.delta > 0 && out > limit {
			n++
		}
	}
	return n
}
