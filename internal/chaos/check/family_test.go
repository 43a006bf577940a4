package check_test

import (
	"testing"
	"time"

	"example.com/dlock/internal/chaos/check"
)

// at returns a holding over [s, e] milliseconds after t0.
func at(id int, write bool, permits int, fence uint64, s, e int) check.Holding {
	t0 := time.Unix(0, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	return check.Holding{ID: id, Write: write, Permits: permits, Fence: fence, Invoke: ms(s - 1), Start: ms(s), End: ms(e)}
}

func TestWriterOverlapsCountsAWriterWithAnyoneInside(t *testing.T) {
	ok := []check.Holding{
		at(1, false, 0, 1, 0, 10), at(2, false, 0, 2, 5, 15), // readers share
		at(3, true, 0, 3, 15, 20),                             // writer after them
		at(4, true, 0, 4, 20, 30), at(4, false, 0, 4, 30, 40), // downgraded
		at(5, false, 0, 5, 31, 35), // reader joins after the downgrade
	}
	if n := check.WriterOverlaps(ok); n != 0 {
		t.Fatalf("legal history: %d overlaps", n)
	}
	bad := append(ok, at(6, true, 0, 6, 38, 50)) // writer while 4 reads
	if n := check.WriterOverlaps(bad); n != 1 {
		t.Fatalf("writer inside a read phase: %d overlaps, want 1", n)
	}
}

func TestFenceInversionsFollowRealTimeOrder(t *testing.T) {
	hs := []check.Holding{at(1, true, 0, 5, 0, 10), at(2, false, 0, 6, 12, 20), at(3, false, 0, 7, 12, 20)}
	if n := check.FenceInversions(hs, true); n != 0 {
		t.Fatalf("increasing fences: %d inversions", n)
	}
	hs = append(hs, at(4, false, 0, 4, 30, 40)) // a read below an earlier write
	if n := check.FenceInversions(hs, true); n != 1 {
		t.Fatalf("read below an earlier write: %d inversions, want 1", n)
	}
	if n := check.FenceInversions(hs, false); n != 3 {
		t.Fatalf("every pair: %d inversions, want 3", n)
	}
}

func TestPermitsOverCountsExcessAtEachStart(t *testing.T) {
	hs := []check.Holding{at(1, false, 2, 1, 0, 10), at(2, false, 1, 2, 5, 20), at(3, false, 2, 3, 10, 20)}
	if n := check.PermitsOver(hs, 3); n != 0 {
		t.Fatalf("at most 3 out: %d excesses", n)
	}
	if n := check.PermitsOver(append(hs, at(4, false, 1, 4, 12, 14)), 3); n != 1 {
		t.Fatalf("4 out: %d excesses, want 1", n)
	}
}
