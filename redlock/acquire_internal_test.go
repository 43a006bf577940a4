package redlock

import (
	"errors"
	"slices"
	"testing"
	"time"

	"example.com/dlock"
)

// TestLateContendedReplyIsNotReleased: replies that arrive after the
// fan-out stopped but before the outcome is decided are released with the
// failed acquisition only if they left something to undo: a grant or an
// unknown outcome. A node that answered "contended" changed nothing and
// costs no release round trip. (Found when the fan-out moved to pooled
// workers and such replies began to arrive in that window.)
func TestLateContendedReplyIsNotReleased(t *testing.T) {
	lc := &lateCleanup{key: "k", token: "tok", ttl: time.Second}
	lc.arrive(1, dlock.Grant{}, &dlock.ContendedError{Remaining: time.Second})
	lc.arrive(2, dlock.Grant{Fence: 7, Holds: 1}, nil)
	lc.arrive(3, dlock.Grant{}, errors.New("i/o timeout"))
	lc.arrive(4, dlock.Grant{}, dlock.ErrInvalid)
	got := lc.decide(true, false)
	if want := []int{2, 3}; !slices.Equal(got, want) {
		t.Fatalf("nodes to release = %v, want %v (the grant and the unknown outcome)", got, want)
	}
	lc = &lateCleanup{key: "k", token: "tok", ttl: time.Second}
	lc.arrive(2, dlock.Grant{Fence: 7, Holds: 2}, nil)
	if got := lc.decide(true, true); got != nil {
		t.Fatalf("re-entry: nodes to release = %v, want none", got)
	}
}
