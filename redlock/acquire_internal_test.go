package redlock

import (
	"errors"
	"slices"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// TestLateContendedReplyIsNotReleased: replies that arrive after the
// fan-out stopped but before the outcome is decided are released with the
// failed acquisition only if they left something to undo: a grant or an
// unknown outcome. A node that answered "contended" changed nothing and
// costs no release round trip. (Found when the fan-out moved to pooled
// workers and such replies began to arrive in that window.)
func TestLateContendedReplyIsNotReleased(t *testing.T) {
	lc := &lateCleanup{key: "k", token: "tok", ttl: time.Second}
	lc.arrive(1, driver.Grant{}, &driver.ContendedError{Remaining: time.Second})
	lc.arrive(2, driver.Grant{Fence: 7, Holds: 1}, nil)
	lc.arrive(3, driver.Grant{}, errors.New("i/o timeout"))
	lc.arrive(4, driver.Grant{}, dlock.ErrInvalid)
	got, grants := lc.decide(true, false, levelRef{}, nil)
	if want := []int{2, 3}; !slices.Equal(got, want) || grants != setOf([]int{2}) {
		t.Fatalf("nodes to release = %v (grants %v), want %v (the grant and the unknown outcome), grants [2]", got, grants.list(), want)
	}
	// A failed re-entry releases the holds it added (grants), never an
	// unknown outcome: that node may not have applied it, and a release
	// there would take the outer acquisition's hold.
	lc = &lateCleanup{key: "k", token: "tok", ttl: time.Second}
	lc.arrive(2, driver.Grant{Fence: 7, Holds: 2}, nil)
	lc.arrive(3, driver.Grant{}, errors.New("i/o timeout"))
	if got, _ := lc.decide(true, true, levelRef{}, nil); !slices.Equal(got, []int{2}) {
		t.Fatalf("re-entry: nodes to release = %v, want [2] (its own grant only)", got)
	}
}

// TestLateGrantJoinsItsLevel: after a successful acquisition, a grant that
// arrives late joins the acquisition's level in the registry (so that its
// Release removes it). Once the level is gone, the grant is released at
// once unless the Release that popped it asked every node (the holding's
// last one), which released it already.
func TestLateGrantJoinsItsLevel(t *testing.T) {
	s := &Store{}
	k, now := regKey{"k", "tok"}, time.Unix(1000, 0)
	st := stamp{start: now, validUntil: now.Add(time.Second), expires: now.Add(2 * time.Second)}
	one := []driver.Grant{{Holds: 1}, {Holds: 1}, {Holds: 1}}
	_, _, ref, ok := s.reg.commit(k, []int{0, 1, 2}, one, 5, false, st)
	if !ok {
		t.Fatal("commit of a new holding refused")
	}
	lc := &lateCleanup{s: s, key: "k", token: "tok", ttl: time.Second}
	lc.arrive(3, driver.Grant{Holds: 1}, nil)
	lc.arrive(4, driver.Grant{}, errors.New("i/o timeout"))
	if got, _ := lc.decide(false, false, ref, nil); got != nil {
		t.Fatalf("nodes to release after success = %v, want none", got)
	}
	// A re-entry on 0, 1, 2 whose grant from node 4 is late.
	two := []driver.Grant{{Holds: 2}, {Holds: 2}, {Holds: 2}}
	_, _, inner, ok := s.reg.commit(k, []int{0, 1, 2}, two, 0, true, st)
	if !ok {
		t.Fatal("re-entry refused")
	}
	set, final, known := s.reg.pop(k, now) // the re-entry's release
	if want := setOf([]int{0, 1, 2}); set != want || final || !known {
		t.Fatalf("inner level = %v (final %v, known %v), want %v", set.list(), final, known, want.list())
	}
	if got := (&lateCleanup{s: s}).decideAndArrive(inner, 4); !slices.Equal(got, []int{4}) {
		t.Fatalf("late grant of a released re-entry: to release %v, want [4]", got)
	}
	set, final, known = s.reg.pop(k, now)
	if want := setOf([]int{0, 1, 2, 3}); set != want || !final || !known {
		t.Fatalf("outer level = %v (final %v, known %v), want nodes %v: the in-time grants and the late one", set.list(), final, known, want.list())
	}
	// The last Release asked every node: a late grant needs nothing more.
	if got := (&lateCleanup{s: s}).decideAndArrive(ref, 4); got != nil {
		t.Fatalf("late grant after the last release: to release %v, want none", got)
	}
}

// decideAndArrive queues a grant from node, decides success for ref and
// returns what the caller must release.
func (lc *lateCleanup) decideAndArrive(ref levelRef, node int) []int {
	lc.arrive(node, driver.Grant{Holds: 1}, nil)
	undo, _ := lc.decide(false, false, ref, nil)
	return undo
}

// TestAcquireSettled: a contended acquisition stops early only once the
// Remaining it reports cannot change with the answers still to come (issue
// 14: the first three of five answers, two from nodes that had not applied
// the holder's latest Extend yet, reported the expiry before it).
func TestAcquireSettled(t *testing.T) {
	const s = time.Second
	granted := reply[driver.Grant]{answered: true}
	held := func(d time.Duration) reply[driver.Grant] {
		return reply[driver.Grant]{err: &driver.ContendedError{Remaining: d}, answered: true}
	}
	pending := reply[driver.Grant]{err: errNoReply}
	failed := reply[driver.Grant]{err: errors.New("i/o timeout"), answered: true}
	cases := []struct {
		name string
		rs   []reply[driver.Grant]
		want bool
	}{
		{"majority granted", []reply[driver.Grant]{granted, granted, granted, pending, pending}, true},
		{"contention does not rule a majority out yet", []reply[driver.Grant]{held(20 * s), held(20 * s), granted, pending, pending}, false},
		{"stale minority among the first answers", []reply[driver.Grant]{held(10 * s), held(10 * s), held(20 * s), pending, pending}, false},
		{"first answers agree", []reply[driver.Grant]{held(20 * s), held(20 * s), held(20 * s), pending, pending}, true},
		{"every node answered", []reply[driver.Grant]{held(10 * s), held(10 * s), held(20 * s), held(20 * s), held(20 * s)}, true},
		{"a failed node counts as free", []reply[driver.Grant]{held(10 * s), failed, held(20 * s), held(20 * s), pending}, false},
		{"unknown remaining", []reply[driver.Grant]{held(-1), held(10 * s), held(20 * s), pending, pending}, true},
	}
	for _, tc := range cases {
		if got := acquireSettled(tc.rs, 5, 3); got != tc.want {
			t.Errorf("%s: acquireSettled = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Once settled, the estimate is the third smallest of five: when a
	// majority can next be free.
	rem := []time.Duration{10 * s, 10 * s, 20 * s, 20 * s, 20 * s}
	if got := contendedRemaining(rem, 5, 3); got != 20*s {
		t.Errorf("contendedRemaining(%v) = %v, want 20s", rem, got)
	}
}
