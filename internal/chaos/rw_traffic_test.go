package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/redisstore"
)

// rwKey is the read-write lock every RW worker contends for.
const rwKey = "rw-chaos"

// rwWorker is one RW-traffic client.
type rwWorker struct {
	id     int
	l      *dlock.RWLocks
	rec    *famRec
	killed bool // it killed a holder already
}

// step makes one random operation: Lock, TryLock, RLock or TryRLock then
// work (Extend shorter and longer, Downgrade) and a release or a kill; Do
// or RDo with a re-entry attempt inside; or a wait cancelled after 2–40 ms.
func (w *rwWorker) step(ctx context.Context, rng *rand.Rand) {
	switch op := rng.IntN(10); {
	case op < 2:
		w.explicit(ctx, rng, true)
	case op < 6:
		w.explicit(ctx, rng, false)
	case op < 8:
		w.do(ctx, rng, op == 6)
	default:
		w.cancelled(ctx, rng)
	}
}

// lease draws the holding's lease: a fixed 200–600 ms one, or 300 ms
// renewed. A fixed one may be killed.
func lease(rng *rand.Rand) (dlock.Option, bool) {
	if rng.IntN(2) == 0 {
		return dlock.WithTTL(time.Duration(200+rng.IntN(400)) * time.Millisecond), true
	}
	return dlock.WithAutoRenew(300 * time.Millisecond), false
}

func (w *rwWorker) explicit(ctx context.Context, rng *rand.Rand, write bool) {
	opt, fixed := lease(rng)
	try := rng.IntN(3) == 0
	wait := dlock.WithWait(time.Duration(rng.IntN(800)) * time.Millisecond)
	invoke := time.Now()
	var h *dlock.RWHolding
	var err error
	switch {
	case write && try:
		h, err = w.l.TryLock(ctx, rwKey, opt)
	case write:
		h, err = w.l.Lock(ctx, rwKey, opt, wait)
	case try:
		h, err = w.l.TryRLock(ctx, rwKey, opt)
	default:
		h, err = w.l.RLock(ctx, rwKey, opt, wait)
	}
	if err != nil {
		w.rec.count("refused")
		return
	}
	w.rec.count(h.Mode().String())
	w.hold(ctx, rng, w.rec.track(w.id, h, invoke, time.Now(), write, 0, fmt.Sprintf("explicit(try=%v fixed=%v)", try, fixed)), h, fixed)
}

// hold works inside h (downgrading a write holding at random), then kills
// a fixed-lease holding (its first, then one in three) or releases it.
func (w *rwWorker) hold(ctx context.Context, rng *rand.Rand, t *tracked, h *dlock.RWHolding, fixed bool) {
	t.work(ctx, rng, func(int) {
		if h.Mode() == driver.RWWrite && rng.IntN(2) == 0 && t.phase(false) {
			w.rec.count("downgrade")
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_ = h.Downgrade(dctx)
		}
	})
	if fixed && (!w.killed || rng.IntN(3) == 0) {
		w.killed = true
		t.kill()
		return
	}
	t.release(ctx)
}

// do runs Do (write) or RDo with a renewed lease; inside, a re-entry of
// the key through fn's context must be refused at once. The function's
// span counts as held while fn's context was not cancelled (Do cancels it
// when the holding is lost).
func (w *rwWorker) do(ctx context.Context, rng *rand.Rand, write bool) {
	fn := func(fctx context.Context) error {
		start := time.Now()
		if fctx.Err() != nil {
			return nil
		}
		w.reenter(ctx, fctx, rng)
		time.Sleep(time.Duration(1+rng.IntN(30)) * time.Millisecond) // work inside the holding
		end := time.Now()
		if fctx.Err() == nil {
			w.rec.add(check.Holding{ID: w.rec.id(), Client: w.id, Write: write, Invoke: start, Start: start, End: end, Note: "do"})
		}
		return nil
	}
	opts := []dlock.Option{dlock.WithAutoRenew(300 * time.Millisecond), dlock.WithWait(time.Duration(rng.IntN(800)) * time.Millisecond)}
	var err error
	if write {
		err = w.l.Do(ctx, rwKey, fn, opts...)
	} else {
		err = w.l.RDo(ctx, rwKey, fn, opts...)
	}
	if err == nil {
		w.rec.count("do")
	}
}

// reenter tries the key again through fn's context: it must fail at once
// (ErrInvalid or ErrUpgrade); a holding it got anyway is recorded, so that
// it shows up as an overlap.
func (w *rwWorker) reenter(ctx, fctx context.Context, rng *rand.Rand) {
	write := rng.IntN(2) == 0
	invoke := time.Now()
	var h *dlock.RWHolding
	var err error
	if write {
		h, err = w.l.TryLock(fctx, rwKey, dlock.WithTTL(200*time.Millisecond))
	} else {
		h, err = w.l.TryRLock(fctx, rwKey, dlock.WithTTL(200*time.Millisecond))
	}
	if err == nil {
		w.rec.count("reentry-granted")
		w.rec.track(w.id, h, invoke, time.Now(), write, 0, "reentry").release(ctx)
		return
	}
	if errors.Is(err, dlock.ErrInvalid) || errors.Is(err, dlock.ErrUpgrade) {
		w.rec.count("reentry-refused")
	}
}

// cancelled waits for the key with a context cancelled after 2–40 ms; a
// holding granted in time is held and released as usual.
func (w *rwWorker) cancelled(ctx context.Context, rng *rand.Rand) {
	cctx, cancel := context.WithTimeout(ctx, time.Duration(2+rng.IntN(38))*time.Millisecond)
	defer cancel()
	write := rng.IntN(2) == 0
	invoke := time.Now()
	var h *dlock.RWHolding
	var err error
	if write {
		h, err = w.l.Lock(cctx, rwKey, dlock.WithAutoRenew(300*time.Millisecond))
	} else {
		h, err = w.l.RLock(cctx, rwKey, dlock.WithAutoRenew(300*time.Millisecond))
	}
	if err != nil {
		w.rec.count("cancelled")
		return
	}
	w.hold(ctx, rng, w.rec.track(w.id, h, invoke, time.Now(), write, 0, "cancelled-wait"), h, false)
}

// writersIgnoreReaders is the negative control: its AcquireWrite takes a
// read holding and calls it a write, so writers share the key with
// readers and with each other.
type writersIgnoreReaders struct{ *redisstore.Store }

func (s writersIgnoreReaders) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	g, err := s.AcquireRead(ctx, key, token, ttl)
	if err == nil {
		g.Mode, g.Readers = driver.RWWrite, 0
	}
	return g, err
}

// runRWTraffic runs 6 RW workers for d over stores made by wrap and
// returns the phases recorded and the operations counted.
func runRWTraffic(t *testing.T, s uint64, d time.Duration, wrap func(*redisstore.Store) driver.RWMutex) ([]check.Holding, map[string]int) {
	t.Helper()
	srv, _ := newRedis(t)
	ctx := testCtx(t, d+time.Minute)
	var rec famRec
	var proxies []*faultproxy.Proxy
	var ws []*rwWorker
	for i := range 6 {
		store, proxy := famClient(t, srv.Addr())
		l, err := dlock.NewRWLocks(wrap(store))
		if err != nil {
			t.Fatal(err)
		}
		proxies, ws = append(proxies, proxy), append(ws, &rwWorker{id: i + 1, l: l, rec: &rec})
	}
	runWorkers(ctx, s, d, proxies, func(ctx context.Context, i int, rng *rand.Rand) { ws[i].step(ctx, rng) })
	for _, w := range ws {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_ = w.l.Close(cctx)
		cancel()
	}
	return rec.result()
}

// R37. Invariant: read-write lock traffic on Redis under connection resets,
// held (lost) and dropped replies keeps many readers or one writer: no
// write phase of a holding intersects another holding's phase while both
// holders take them to be valid, and fences follow real-time order (a
// write's above every earlier holding's, a read's above every earlier
// write's). The traffic mixes Lock, TryLock, RLock, TryRLock, Do and RDo
// (with a re-entry inside, which must be refused), Downgrade, Extend
// shorter and longer than the lease, waits cancelled after 2–40 ms and
// holders killed (fixed lease, never released). Pass: zero violations.
// Negative control: control-writers-ignore-readers, a store whose
// AcquireWrite takes a read holding, must show overlaps.
func TestRWTrafficZeroViolations(t *testing.T) {
	s := composedSeed()
	d := 3 * time.Second
	if testing.Short() {
		d = 2 * time.Second
	}
	t.Run("redis", func(t *testing.T) {
		t.Logf("seed %d (DLOCK_CHAOS_SEED to replay)", s)
		hs, counts := runRWTraffic(t, s, d, func(st *redisstore.Store) driver.RWMutex { return st })
		over, inv := check.WriterOverlaps(hs), check.FenceInversions(hs, true)
		t.Logf("RESULT rw seed=%d phases=%d %v writer-overlaps=%d fence-inversions=%d reader-overlaps=%d", s, len(hs), counts, over, inv, readerOverlaps(hs))
		for _, p := range check.WriterOverlapPairs(hs, 5) {
			t.Logf("overlap: %s | %s", phaseString(p[0]), phaseString(p[1]))
		}
		if over != 0 || inv != 0 {
			t.Fatalf("seed %d: %d writer overlaps, %d fence inversions", s, over, inv)
		}
		for _, op := range []string{"write", "read", "do", "downgrade", "extend-shorter", "extend-longer", "cancelled", "killed", "reentry-refused"} {
			if counts[op] == 0 {
				t.Errorf("no %s in the traffic: it did not exercise it", op)
			}
		}
		if shared := readerOverlaps(hs); shared == 0 {
			t.Errorf("no two read phases overlapped: the traffic did not share the key")
		}
		if counts["reentry-granted"] != 0 {
			t.Errorf("%d re-entries granted through Do's context", counts["reentry-granted"])
		}
	})
	t.Run("control-writers-ignore-readers", func(t *testing.T) {
		hs, counts := runRWTraffic(t, s, d, func(st *redisstore.Store) driver.RWMutex { return writersIgnoreReaders{st} })
		over := check.WriterOverlaps(hs)
		t.Logf("RESULT rw-control seed=%d phases=%d %v writer-overlaps=%d", s, len(hs), counts, over)
		if over == 0 {
			t.Fatalf("seed %d: writers that ignore readers made no overlap: the checker cannot fail", s)
		}
	})
}

// readerOverlaps counts the pairs of read phases of different holdings
// that intersect: readers sharing the key, which the traffic must show.
func readerOverlaps(hs []check.Holding) int {
	n := 0
	for i, a := range hs {
		for _, b := range hs[i+1:] {
			if a.ID != b.ID && !a.Write && !b.Write && a.Start.Before(b.End) && b.Start.Before(a.End) {
				n++
			}
		}
	}
	return n
}

// phaseString describes h with times in ms since famEpoch.
func phaseString(h check.Holding) string {
	return fmt.Sprintf("id=%d client=%d write=%v fence=%d %s invoke=%s start=%s end=%s", h.ID, h.Client, h.Write, h.Fence, h.Note, sinceEpoch(h.Invoke), sinceEpoch(h.Start), sinceEpoch(h.End))
}
