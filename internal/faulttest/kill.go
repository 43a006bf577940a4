package faulttest

import (
	"context"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/overlap"
)

// LeaderKill is the session stores' leader-kill scenario (etcdstore,
// zkstore): the first Client holds key "k" across the kill of the
// cluster's leader while Contenders on every Client lock it again and
// again; every holding is recorded.
type LeaderKill struct {
	Clients []*dlock.Client // each on a store with its own session
	Seed    uint64
	Hold    time.Duration // how long the long holder holds (heeding its loss)
	Settle  time.Duration // how long to wait for 20 holdings after the long one
	Kill    func()        // kills the leader
}

// KillResult is what LeaderKill.Run saw.
type KillResult struct {
	Long     overlap.Window    // the long holding across the kill
	Rec      *overlap.Recorder // every holding
	KilledAt time.Time         // when Kill was called
	After    int               // holdings started after the long one ended (20 at most waited for)
}

// Run locks "k" with Clients[0], starts 4 Contenders, kills the leader,
// holds "k" for Hold across the election, then waits up to Settle for 20
// holdings started after it, and stops the contenders (also if the test
// fails). The caller judges the result (CheckOverlaps).
func (k LeaderKill) Run(t testing.TB, ctx context.Context) KillResult {
	t.Helper()
	long, err := k.Clients[0].Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	r := KillResult{Rec: &overlap.Recorder{}}
	stop := Contenders(k.Clients, 4, "k", 10*time.Second, k.Seed, r.Rec)
	t.Cleanup(stop) // on failure too; a second stop is harmless
	r.KilledAt = time.Now()
	k.Kill()
	r.Long = Hold(long, from, "c0/long", k.Hold, true, r.Rec)
	Within(k.Settle, func() bool { return r.Rec.StartedAfter(r.Long.To) >= 20 })
	stop()
	r.After = r.Rec.StartedAfter(r.Long.To)
	return r
}

// CheckOverlaps judges an overlap test: it fails t if a sound lock shows
// overlaps (naming the first five), or if the negative control (broken)
// shows none: the detector saw nothing. It returns the overlaps.
func CheckOverlaps(t testing.TB, rec *overlap.Recorder, broken bool) []string {
	t.Helper()
	bad := rec.Overlaps()
	switch {
	case broken && len(bad) == 0:
		t.Fatal("negative control: no overlap with the owner check skipped; the detector saw nothing")
	case !broken && len(bad) > 0:
		t.Fatalf("%d overlaps, first: %s", len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
	}
	return bad
}
