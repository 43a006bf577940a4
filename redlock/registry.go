package redlock

import (
	"math/bits"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// MaxNodes is the largest node count New accepts: the Store records the
// nodes of each holding in a 64-bit mask.
const MaxNodes = 64

// nodeSet is a set of node indices, bit i for node i.
type nodeSet uint64

func (s nodeSet) has(i int) bool { return s&(1<<uint(i)) != 0 }

func setOf(nodes []int) nodeSet {
	var s nodeSet
	for _, i := range nodes {
		s |= 1 << uint(i)
	}
	return s
}

// list returns the members of s in increasing order.
func (s nodeSet) list() []int {
	out := make([]int, 0, bits.OnesCount64(uint64(s)))
	for ; s != 0; s &= s - 1 {
		out = append(out, bits.TrailingZeros64(uint64(s)))
	}
	return out
}

// regKey names a holding: one token's holding of one key. A struct, not a
// joined string, so that a lookup allocates nothing.
type regKey struct{ key, token string }

// level is one hold of a holding: the nodes where that acquisition added a
// hold (its in-time grants, then its late grants as they arrive).
type level struct {
	id    uint64
	nodes nodeSet
}

// holding is the Store's record of a holding it granted. Release pops the
// top level and releases only on its nodes, so that releasing a re-entry
// never takes a hold the re-entry did not add (issue 13, S3); a re-entry
// reports fence, the exact fence raised at the first acquisition (S4).
//
// Invariant: a node's hold count for the token is the number of levels that
// contain it, as far as the nodes' answers tell (see align). Popping any
// level keeps it, so every remaining level's nodes keep a hold.
type holding struct {
	fence  uint64
	levels []level // bottom first: levels[0] is the first acquisition
	nextID uint64
	// stamp is from the latest (by start) successful acquisition or
	// extension.
	stamp stamp
	// derived is the number of levels derive built (0 for none): the ids
	// of the levels a late grant of a derived record belongs to.
	derived int
	// ended is set when the record leaves the map by its last Release,
	// which popped level finalID and asked every node, each after the
	// token's calls in flight there: a late grant of that level needs no
	// release of its own. replaced is set when a new holding replaced the
	// record: its grants waited for every call of this one, so its hold
	// counts include this one's late grants too.
	ended, replaced bool
	finalID         uint64
}

// stamp is the timing of one successful acquisition or extension.
type stamp struct {
	start time.Time
	// validUntil is Redlock's validity: start + TTL − drift. Until then no
	// other holding can exist, so a re-entry settled before it continues
	// this holding even if it cannot show a majority of earlier holds.
	validUntil time.Time
	// expires is when the record may be dropped: start + 2×TTL. The lease
	// ended a TTL earlier, and every node dropped the key by then unless it
	// applied a call very late; a holding the Store does not know is handled
	// safely anyway (see Store.Release).
	expires time.Time
}

// after returns whichever of st and o started later.
func (st stamp) after(o stamp) stamp {
	if o.start.After(st.start) {
		return o
	}
	return st
}

// registry records the holdings a Store granted, keyed by key and token. It
// is guarded by one mutex, never held across I/O. Records leave at the
// final release, or lazily once expired: a lookup drops an expired record,
// and an insertion sweeps every expired record whenever the map has doubled
// since the last sweep (amortised O(1); at most about twice the live
// holdings are kept, plus sweepMin).
type registry struct {
	quorum int // the Store's; derive's threshold (0 counts as 1)

	mu      sync.Mutex
	m       map[regKey]*holding
	sweepAt int
}

// sweepMin is the map size below which no sweep runs.
const sweepMin = 64

// levelRef names the level of one acquisition in one record, for its late
// grants. derived marks a record built by derive, whose acquisition is its
// bottom level and whose upper levels hold the nodes' earlier holds.
type levelRef struct {
	k       regKey
	rec     *holding
	id      uint64
	derived bool
}

// live returns k's record if it has not expired, dropping it if it has.
func (r *registry) live(k regKey, now time.Time) *holding {
	rec := r.m[k]
	if rec != nil && now.After(rec.stamp.expires) {
		delete(r.m, k)
		return nil
	}
	return rec
}

// known reports whether the Store holds a record of k's holding.
func (r *registry) known(k regKey, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live(k, now) != nil
}

// continues reports whether an acquisition by k's token settled at now
// continues the recorded holding (a re-entry that keeps its fence): the
// record exists, and either a majority of the granting nodes already held
// the key for the token (confirmed: no other holding can have come between
// on them, and every majority meets them) or the holding's validity has not
// run out (no other holding can exist yet).
func (r *registry) continues(k regKey, now time.Time, confirmed bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.live(k, now)
	return rec != nil && (confirmed || now.Before(rec.stamp.validUntil))
}

// commit records an acquisition that succeeded on nodes (grants[j] is
// nodes[j]'s grant) and returns the holding's fence, its hold count (its
// level count) and a reference to the acquisition's level for late grants.
//
// With reenter, the recorded holding gets a new top level and keeps its
// fence; if there is no record (its final release came in between), ok is
// false and nothing changes. Otherwise the acquisition is a new holding
// whose fence was raised on a majority: it replaces any record, with levels
// built by derive.
func (r *registry) commit(k regKey, nodes []int, grants []driver.Grant, fence uint64, reenter bool, st stamp) (f uint64, holds int, ref levelRef, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.live(k, st.start)
	switch {
	case reenter && rec == nil:
		return 0, 0, levelRef{}, false
	case reenter:
		rec.push(nodes, grants)
		rec.stamp = rec.stamp.after(st)
		top := rec.levels[len(rec.levels)-1]
		return rec.fence, len(rec.levels), levelRef{k: k, rec: rec, id: top.id}, true
	}
	if rec != nil {
		rec.replaced = true
	}
	rec = &holding{fence: fence, stamp: st}
	r.insert(k, rec, st.start)
	derive(rec, nodes, grants, r.quorum)
	rec.derived = len(rec.levels)
	return rec.fence, len(rec.levels), levelRef{k: k, rec: rec, id: rec.levels[0].id, derived: true}, true
}

// insert adds rec, sweeping expired records if the map doubled since the
// last sweep.
func (r *registry) insert(k regKey, rec *holding, now time.Time) {
	if r.m == nil {
		r.m = make(map[regKey]*holding)
	}
	if len(r.m) >= max(r.sweepAt, sweepMin) {
		for k2, h := range r.m {
			if now.After(h.stamp.expires) {
				delete(r.m, k2)
			}
		}
		r.sweepAt = 2 * len(r.m)
	}
	r.m[k] = rec
}

// derive builds the levels of a holding the Store did not know, from the
// nodes' hold counts: the token holds there already (an earlier attempt of
// the same call whose reply was lost, or an acquisition through another
// Store). It builds as many levels as the count that q of the granting
// nodes reach (the q-th largest, at least 1): fewer nodes with an extra hold
// are more likely a release of this token still on its way than a holding
// (the Client's release of an extra level there would then free the node
// twice); their extra holds stay untracked and expire with the key. Level j
// holds the nodes with more than j holds, so the top level, popped first,
// has only the nodes with the most holds: releasing such extra holds (the
// Client's ghost path, or a foreign re-entry's release) never frees a node
// before its last hold.
func derive(rec *holding, nodes []int, grants []driver.Grant, q int) {
	hs := make([]int, len(grants))
	for pos, g := range grants {
		hs[pos] = g.Holds
	}
	most := max(kthLargest(hs, max(q, 1)), 1)
	for j := range most {
		var s nodeSet
		for pos, g := range grants {
			if max(g.Holds, 1) > j {
				s |= 1 << uint(nodes[pos])
			}
		}
		rec.levels = append(rec.levels, level{id: rec.nextID, nodes: s})
		rec.nextID++
	}
}

// push adds a re-entry's level and aligns the lower levels with the hold
// counts its grants report.
func (rec *holding) push(nodes []int, grants []driver.Grant) {
	rec.levels = append(rec.levels, level{id: rec.nextID, nodes: setOf(nodes)})
	rec.nextID++
	top := len(rec.levels) - 1
	for pos, g := range grants {
		rec.align(nodes[pos], g.Holds, top)
	}
}

// align makes node i a member of exactly holds−1 of the levels below top
// (as many as there are), the bottom ones: the node's other holds belong to
// earlier acquisitions, and counting them in the lowest levels releases them
// last. A node that lost its earlier holds (it restarted empty, say) leaves
// those levels, which then no longer ask it; a node with holds the record
// missed (a late grant not yet seen) joins them.
func (rec *holding) align(i, holds, top int) {
	want := holds - 1
	for j := 0; j < top; j++ {
		if want > 0 {
			rec.levels[j].nodes |= 1 << uint(i)
			want--
		} else {
			rec.levels[j].nodes &^= 1 << uint(i)
		}
	}
}

// addLate records a late grant of node i (reporting holds) to ref's
// acquisition: it joins the acquisition's level, and its earlier holds the
// levels that count them: those below a re-entry's level (align), or, for a
// derived record, the levels above its bottom one, as derive would have
// placed them. It returns how many holds the caller must release on node i
// itself: one for each of those levels that was released already by a
// Release that did not ask node i (any but the holding's last, see
// holding.ended).
func (r *registry) addLate(ref levelRef, i, holds int) (releases int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := ref.rec
	live := r.m[ref.k] == rec
	targets := 1
	if ref.derived {
		targets = min(max(holds, 1), rec.derived) // more holds: not ours
	}
	for t := range targets {
		id := ref.id + uint64(t)
		if j := rec.index(id); live && j >= 0 {
			rec.levels[j].nodes |= 1 << uint(i)
			if !ref.derived {
				rec.align(i, holds, j)
			}
			continue
		}
		if !rec.replaced && !(rec.ended && id == rec.finalID) {
			releases++
		}
	}
	return releases
}

// index returns the position of the level with id, or -1.
func (rec *holding) index(id uint64) int {
	for j, l := range rec.levels {
		if l.id == id {
			return j
		}
	}
	return -1
}

// pop removes the top level of k's holding and returns its nodes. final is
// true when it was the last level: the record is dropped, and the caller
// asks every node. known is false if the Store has no record of the
// holding.
func (r *registry) pop(k regKey, now time.Time) (nodes nodeSet, final, known bool) {
	nodes, _, final, known = r.popFence(k, now)
	return nodes, final, known
}

// popFence is pop that also returns the holding's fence (0 if unknown).
func (r *registry) popFence(k regKey, now time.Time) (nodes nodeSet, fence uint64, final, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.live(k, now)
	if rec == nil {
		return 0, 0, false, false
	}
	top := rec.levels[len(rec.levels)-1]
	rec.levels = rec.levels[:len(rec.levels)-1]
	if len(rec.levels) == 0 {
		delete(r.m, k)
		rec.ended, rec.finalID = true, top.id
		return top.nodes, rec.fence, true, true
	}
	return top.nodes, rec.fence, false, true
}

// extended records a successful extension of k's holding and returns its
// recorded fence and hold count; known is false if there is no record. The
// caller holds r.mu (one lock for a whole renewal batch).
func (r *registry) extended(k regKey, st stamp) (fence uint64, holds int, known bool) {
	rec := r.live(k, st.start)
	if rec == nil {
		return 0, 0, false
	}
	rec.stamp = rec.stamp.after(st)
	return rec.fence, len(rec.levels), true
}

// fenceOf returns the fence of k's holding, if the Store has a record of it.
func (r *registry) fenceOf(k regKey, now time.Time) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.live(k, now); rec != nil {
		return rec.fence, true
	}
	return 0, false
}

// size is the number of records (tests).
func (r *registry) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
