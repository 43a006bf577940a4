package lease

import (
	"context"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/fakeclock"
)

// fakeClock runs due callbacks synchronously in Advance.
type (
	fakeClock = fakeclock.Clock
	fakeTimer = fakeclock.Timer
)

// fakeLease records its renewals; fail makes them fail.
type fakeLease struct {
	name  string
	slot  Slot
	ttl   time.Duration
	ended bool
	fail  bool
}

func (l *fakeLease) Slot() *Slot { return &l.slot }
func (l *fakeLease) BeginRenewal() (driver.ExtendRequest, time.Time, bool) {
	return driver.ExtendRequest{Key: l.name, TTL: l.ttl}, time.Now().Add(time.Hour), !l.ended
}
func (l *fakeLease) SettleRenewal(_ time.Time, _ driver.ExtendRequest, res driver.ExtendResult) bool {
	return res.Err != nil
}
func (l *fakeLease) Current() (time.Duration, bool) { return l.ttl, l.ended }

// batches records each ExtendMany call's keys; failing keys fail.
type batches struct {
	calls   [][]string
	failing map[string]bool
}

func (b *batches) ExtendMany(_ context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	keys := make([]string, len(reqs))
	res := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
		if b.failing[r.Key] {
			res[i].Err = driver.ErrUnavailable
		}
	}
	b.calls = append(b.calls, keys)
	return res
}

func (b *batches) take() [][]string {
	c := b.calls
	b.calls = nil
	return c
}

// Leases due within a tenth of their period are renewed in one batch, on
// time; a removed lease is not renewed; Retune moves a lease's next renewal;
// a failed renewal is retried after a fifth of the period.
func TestRenewerBatchesRemovesRetunesAndRetries(t *testing.T) {
	clk := fakeclock.New(time.Unix(1000, 0))
	b := &batches{failing: map[string]bool{}}
	r := NewRenewer[*fakeTimer](clk, b)
	a := &fakeLease{name: "a", slot: NewSlot(), ttl: 3 * time.Second}
	bb := &fakeLease{name: "b", slot: NewSlot(), ttl: 3 * time.Second}
	gone := &fakeLease{name: "gone", slot: NewSlot(), ttl: 3 * time.Second}
	r.Add(a, a.ttl)
	clk.Advance(50 * time.Millisecond) // b is due 50 ms after a: within a tenth of 1 s
	r.Add(bb, bb.ttl)
	r.Add(gone, gone.ttl)
	r.Remove(gone)
	if gone.slot.Queued() {
		t.Fatal("removed lease still queued")
	}
	clk.Advance(time.Second - 50*time.Millisecond - time.Millisecond)
	if c := b.take(); len(c) != 0 {
		t.Fatalf("renewed before the period: %v", c)
	}
	clk.Advance(time.Millisecond)
	if c := b.take(); len(c) != 1 || len(c[0]) != 2 {
		t.Fatalf("batches at the period: %v, want one batch of a and b", c)
	}
	// Retune a to a 300 ms TTL: next renewal after 100 ms, not 1 s.
	r.Retune(a, 300*time.Millisecond)
	a.ttl = 300 * time.Millisecond
	clk.Advance(100 * time.Millisecond)
	if c := b.take(); len(c) != 1 || len(c[0]) != 1 || c[0][0] != "a" {
		t.Fatalf("after Retune: %v, want a alone", c)
	}
	// A failing renewal is retried after max(period/5, 5 ms) = 20 ms.
	b.failing["a"] = true
	clk.Advance(100 * time.Millisecond)
	b.take()
	clk.Advance(20 * time.Millisecond)
	if c := b.take(); len(c) != 1 || c[0][0] != "a" {
		t.Fatalf("retry of a failed renewal: %v", c)
	}
	a.ended, bb.ended = true, true
	clk.Advance(2 * time.Second)
	b.take()
	clk.Advance(2 * time.Second)
	if c := b.take(); len(c) != 0 || len(r.q) != 0 {
		t.Fatalf("ended leases renewed (%v) or queued (%d)", c, len(r.q))
	}
}

// The queue is a min-heap whatever the order of pushes and removals
// (seeded; the seed is printed on failure).
func TestQueueOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	var q queue
	base := time.Unix(0, 0)
	var want []int64
	for i := range 200 {
		s := &Slot{index: -1, next: base.Add(time.Duration(rng.IntN(1000)))}
		q.push(entry{slot: s})
		if i%5 == 4 { // remove one at random
			e := q.remove(rng.IntN(len(q)))
			if e.slot.index != -1 {
				t.Fatalf("seed %d: removed slot keeps index %d", seed, e.slot.index)
			}
		}
	}
	for i, e := range q {
		if int(e.slot.index) != i {
			t.Fatalf("seed %d: slot index %d at %d", seed, e.slot.index, i)
		}
		want = append(want, e.slot.next.UnixNano())
	}
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	for _, w := range want {
		if got := q.remove(0).slot.next.UnixNano(); got != w {
			t.Fatalf("seed %d: popped %d, want %d", seed, got, w)
		}
	}
}
