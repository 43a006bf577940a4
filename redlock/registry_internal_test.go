package redlock

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// grantsOf builds the (nodes, grants) pair of an acquisition from node →
// hold count.
func grantsOf(holds map[int]int) ([]int, []driver.Grant) {
	var nodes []int
	for i := range holds {
		nodes = append(nodes, i)
	}
	slices.Sort(nodes)
	grants := make([]driver.Grant, len(nodes))
	for pos, i := range nodes {
		grants[pos] = driver.Grant{Holds: holds[i]}
	}
	return nodes, grants
}

// levelsOf lists a record's levels, bottom first, as node lists.
func levelsOf(r *registry, k regKey) [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]int
	for _, l := range r.m[k].levels {
		out = append(out, l.nodes.list())
	}
	return out
}

func testStamp(now time.Time, ttl time.Duration) stamp {
	return stamp{start: now, validUntil: now.Add(ttl - ttl/50), expires: now.Add(2 * ttl)}
}

// TestRegistryS3Levels is S3's schedule on the registry alone: the outer
// acquisition on 0, 1, 2; the re-entry on 0, 1 (holding already) and 3, 4
// (fresh). Releasing the re-entry pops only its nodes; the outer level keeps
// all three of its nodes and its fence.
func TestRegistryS3Levels(t *testing.T) {
	var r registry
	k, now := regKey{"k", "tok"}, time.Unix(1000, 0)
	nodes, grants := grantsOf(map[int]int{0: 1, 1: 1, 2: 1})
	if f, h, _, ok := r.commit(k, nodes, grants, 6, false, testStamp(now, time.Minute)); !ok || f != 6 || h != 1 {
		t.Fatalf("first acquisition = fence %d, holds %d, ok %v; want 6, 1, true", f, h, ok)
	}
	if !r.continues(k, now, false) {
		t.Fatal("a re-entry within the holding's validity does not continue it")
	}
	nodes, grants = grantsOf(map[int]int{0: 2, 1: 2, 3: 1, 4: 1})
	f, h, _, ok := r.commit(k, nodes, grants, 0, true, testStamp(now.Add(time.Second), time.Minute))
	if !ok || f != 6 || h != 2 {
		t.Fatalf("re-entry = fence %d, holds %d, ok %v; want 6, 2, true", f, h, ok)
	}
	if got, want := levelsOf(&r, k), [][]int{{0, 1, 2}, {0, 1, 3, 4}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("levels = %v, want %v", got, want)
	}
	set, final, known := r.pop(k, now)
	if !slices.Equal(set.list(), []int{0, 1, 3, 4}) || final || !known {
		t.Fatalf("inner release = nodes %v, final %v, known %v; want [0 1 3 4], false, true", set.list(), final, known)
	}
	set, final, known = r.pop(k, now)
	if !slices.Equal(set.list(), []int{0, 1, 2}) || !final || !known {
		t.Fatalf("outer release = nodes %v, final %v, known %v; want [0 1 2], true, true", set.list(), final, known)
	}
	if r.known(k, now) {
		t.Fatal("record kept after the final release")
	}
}

// TestRegistryAlignsWithNodeCounts: a re-entry's grants tell how many holds
// each node has; the lower levels follow them (a node that lost its earlier
// hold leaves them; one with a hold the record missed joins the bottom).
func TestRegistryAlignsWithNodeCounts(t *testing.T) {
	var r registry
	k, now := regKey{"k", "tok"}, time.Unix(1000, 0)
	nodes, grants := grantsOf(map[int]int{0: 1, 1: 1, 2: 1})
	r.commit(k, nodes, grants, 3, false, testStamp(now, time.Minute))
	// Node 2 restarted empty (grants fresh: 1 hold); node 3 holds already
	// (the outer's late grant, not seen yet).
	nodes, grants = grantsOf(map[int]int{0: 2, 1: 2, 2: 1, 3: 2})
	r.commit(k, nodes, grants, 0, true, testStamp(now, time.Minute))
	if got, want := levelsOf(&r, k), [][]int{{0, 1, 3}, {0, 1, 2, 3}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("levels = %v, want %v", got, want)
	}
}

// TestRegistryDeriveForUnknownHolding: a holding the Store does not know
// (ghost holds of an earlier attempt whose reply was lost, or a re-entry
// through another Store) gets levels from the nodes' counts with the most
// held nodes on top, so releasing the extra holds never frees a node before
// its last hold.
func TestRegistryDeriveForUnknownHolding(t *testing.T) {
	var r registry
	k, now := regKey{"k", "tok"}, time.Unix(1000, 0)
	nodes, grants := grantsOf(map[int]int{0: 3, 1: 2, 2: 2, 3: 1})
	if _, _, _, ok := r.commit(k, nodes, grants, 0, true, testStamp(now, time.Minute)); ok {
		t.Fatal("re-entry of an unknown holding committed without a fence raise")
	}
	f, h, _, ok := r.commit(k, nodes, grants, 9, false, testStamp(now, time.Minute))
	if !ok || f != 9 || h != 3 {
		t.Fatalf("commit = fence %d, holds %d, ok %v; want 9, 3, true", f, h, ok)
	}
	if got, want := levelsOf(&r, k), [][]int{{0, 1, 2, 3}, {0, 1, 2}, {0}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("levels = %v, want %v", got, want)
	}
}

// TestRegistryDeriveNeedsAMajorityOfExtraHolds: an extra hold on fewer
// than a quorum of the granting nodes (likely a release of the token still
// on its way) makes no level of its own, so the Client's ghost path does
// not release that node a second time.
func TestRegistryDeriveNeedsAMajorityOfExtraHolds(t *testing.T) {
	r := registry{quorum: 3}
	k, now := regKey{"k", "tok"}, time.Unix(1000, 0)
	nodes, grants := grantsOf(map[int]int{0: 2, 1: 1, 2: 1, 3: 1})
	if _, h, _, _ := r.commit(k, nodes, grants, 9, false, testStamp(now, time.Minute)); h != 1 {
		t.Fatalf("holds = %d, want 1", h)
	}
	k2 := regKey{"k", "other"}
	nodes, grants = grantsOf(map[int]int{0: 2, 1: 2, 2: 2, 3: 1})
	if _, h, _, _ := r.commit(k2, nodes, grants, 9, false, testStamp(now, time.Minute)); h != 2 {
		t.Fatalf("holds with extra holds on a quorum = %d, want 2", h)
	}
	if got, want := levelsOf(&r, k2), [][]int{{0, 1, 2, 3}, {0, 1, 2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("levels = %v, want %v", got, want)
	}
}

// TestRegistryContinuesOnlyWhileValidOrConfirmed: after the holding's
// validity, a re-entry continues it (keeps its fence) only if a majority of
// its grants found the token holding already; otherwise it is a new holding.
func TestRegistryContinuesOnlyWhileValidOrConfirmed(t *testing.T) {
	var r registry
	k, now := regKey{"k", "tok"}, time.Unix(1000, 0)
	ttl := time.Second
	nodes, grants := grantsOf(map[int]int{0: 1, 1: 1, 2: 1})
	r.commit(k, nodes, grants, 4, false, testStamp(now, ttl))
	late := now.Add(ttl)
	if r.continues(k, late, false) {
		t.Error("re-entry after the validity, without a confirming majority, continues the holding")
	}
	if !r.continues(k, late, true) {
		t.Error("re-entry confirmed by a majority does not continue the holding")
	}
	if r.continues(k, now.Add(2*ttl+time.Millisecond), true) {
		t.Error("an expired record still continues")
	}
	if r.known(k, now) {
		t.Error("expired record not dropped on lookup")
	}
}

// TestRegistryMemoryIsBounded: holdings abandoned without a release (their
// leases lost) are dropped lazily: the map never exceeds about twice the
// live holdings plus sweepMin, however many were abandoned.
func TestRegistryMemoryIsBounded(t *testing.T) {
	var r registry
	now := time.Unix(1000, 0)
	const ttl, live = time.Second, 10
	nodes, grants := grantsOf(map[int]int{0: 1, 1: 1, 2: 1})
	for i := range 10000 {
		now = now.Add(time.Millisecond) // each holding expires 2 s after it starts
		r.commit(regKey{fmt.Sprint("k", i), "tok"}, nodes, grants, uint64(i), false, testStamp(now, ttl))
		if i < live {
			// A few held for the whole run (renewed far ahead).
			r.mu.Lock()
			r.m[regKey{fmt.Sprint("k", i), "tok"}].stamp.expires = now.Add(time.Hour)
			r.mu.Unlock()
		}
		// 2000 holdings are within their 2 s at any time.
		if n := r.size(); n > 2*(2000+live)+sweepMin {
			t.Fatalf("after %d holdings the registry holds %d records", i+1, n)
		}
	}
	for i := range live {
		if !r.known(regKey{fmt.Sprint("k", i), "tok"}, now) {
			t.Fatalf("live holding %d dropped", i)
		}
	}
}
