package cmp

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestInterleaveRotates: every library runs InterleaveBlocks blocks of
// dur/InterleaveBlocks, and who goes first turns from block to block and
// with the round.
func TestInterleaveRotates(t *testing.T) {
	for round := range 2 {
		var order []int
		Interleave(3, 30*time.Millisecond, round, func(i int, d time.Duration) {
			if d != 3*time.Millisecond {
				t.Errorf("block of %v, want 3ms", d)
			}
			order = append(order, i)
		})
		if len(order) != 3*InterleaveBlocks {
			t.Fatalf("round %d: %d blocks, want %d", round, len(order), 3*InterleaveBlocks)
		}
		for b := range InterleaveBlocks {
			if first := order[3*b]; first != (b+round)%3 {
				t.Errorf("round %d, block %d: %d first, want %d", round, b, first, (b+round)%3)
			}
			blk := slices.Clone(order[3*b : 3*b+3])
			slices.Sort(blk)
			if !slices.Equal(blk, []int{0, 1, 2}) {
				t.Errorf("round %d, block %d runs %v, want each library once", round, b, order[3*b:3*b+3])
			}
		}
	}
}

// TestBlockCountsAndStopsOnFailure: a block counts its cycles and
// latencies, and a failed lock ends it with the error kept.
func TestBlockCountsAndStopsOnFailure(t *testing.T) {
	dir := t.TempDir()
	var tl Tally
	n := 0
	boom := errors.New("boom")
	lock := func(context.Context, string) (func(context.Context) error, error) {
		if n++; n > 5 {
			return nil, boom
		}
		return func(context.Context) error { return nil }, nil
	}
	critical := func(context.Context) error { defer tl.Enter(dir)(); return nil }
	tl.Block(Cycle{Lock: lock, Key: "k", Critical: critical}, time.Minute)
	if tl.Ops != 5 || len(tl.Lat) != 5 || tl.Failures != 1 || tl.FirstErr != "boom" || tl.Overlaps != 0 || tl.Wall <= 0 {
		t.Errorf("tally %+v: want 5 ops and latencies, 1 failure (boom), no overlap", tl)
	}
	if len(tl.PerWorker) != 1 || tl.PerWorker[0] != 5 {
		t.Errorf("share %v, want [5]", tl.PerWorker)
	}
}
