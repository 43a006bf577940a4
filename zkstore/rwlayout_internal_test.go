package zkstore

import (
	"slices"
	"testing"
)

// TestRWOrderAndRelease: Curator's order of read-write lock nodes (by the
// sequence after the marker; other children left out), the writer first on
// a downgrade's tie, and the release rule of SubscribeRW: a node gone that
// held (the writer replaced by its downgrade, in either listing order) is a
// release; a queued writer withdrawn is not.
func TestRWOrderAndRelease(t *testing.T) {
	w := "_c_11111111-1111-4111-8111-111111111111-__WRIT__0000000003"
	d := "_c_22222222-2222-4222-8222-222222222222-__READ__0000000003" // w's downgrade
	r := "_c_33333333-3333-4333-8333-333333333333-__READ__0000000001"
	q := "_c_44444444-4444-4444-8444-444444444444-__WRIT__0000000007"
	got := rwSorted([]string{q, d, "other", w, r})
	if want := []string{r, w, d, q}; !slices.Equal(got, want) {
		t.Fatalf("rwSorted = %v, want %v", got, want)
	}
	if !rwHolds(got, 0) || rwHolds(got, 1) || rwHolds(got, 2) || rwHolds(got, 3) || rwReaders(got) != 1 {
		t.Fatalf("holders of %v wrong", got)
	}
	l := func(nodes ...string) rwList {
		return rwList{nodes: rwSorted(nodes), exists: true, cversion: int32(len(nodes))}
	}
	during := l(d, w) // the server may list the downgrade first
	after := rwList{nodes: []string{d}, exists: true, cversion: during.cversion + 1}
	if !released(during, after) || !released(l(w), rwList{nodes: []string{d}, exists: true, cversion: 3}) {
		t.Error("a downgrade (the writer's node gone) is not a release")
	}
	withdrawn := rwList{nodes: []string{d}, exists: true, cversion: 3}
	if released(rwList{nodes: []string{d, q}, exists: true, cversion: 2}, withdrawn) {
		t.Error("a queued writer withdrawn counted as a release")
	}
	if !released(rwList{nodes: []string{d}, exists: true, cversion: 1}, rwList{nodes: []string{d}, exists: true, cversion: 3}) {
		t.Error("a node that came and went unseen is not counted")
	}
}
