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
)

// rwWorker is one RW-traffic client.
type rwWorker struct {
	famEnv
	id     int
	l      *dlock.RWLocks
	killed bool // it killed a holder already
}

func (w *rwWorker) close(ctx context.Context) error { return w.l.Close(ctx) }

// step makes one random operation: Lock, TryLock, RLock or TryRLock then
// work (Extend shorter and longer, Downgrade) and a release or a kill; Do
// or RDo with a re-entry attempt inside; or a wait cancelled after 2–40 ms.
// Once the run goes on only for a missing operation, it makes that one.
func (w *rwWorker) step(ctx context.Context, rng *rand.Rand) {
	if w.late() {
		w.makeMissing(ctx, rng)
		return
	}
	write := rng.IntN(w.writeOneIn) == 0
	switch op := rng.IntN(5); {
	case op < 3:
		w.explicit(ctx, rng, write, write && w.patientWriters)
	case op < 4:
		w.do(ctx, rng, write)
	default:
		w.cancelled(ctx, rng, write && !w.patientWriters)
	}
}

// makeMissing makes an operation the run still misses, in a form that
// leaves no writer-waiting mark behind where it can: a reader's cancelled
// wait, an RDo, or a Lock or RLock that waits the longest (a writer that
// gives up keeps readers out for 2 s, and on ZooKeeper every later writer
// too).
func (w *rwWorker) makeMissing(ctx context.Context, rng *rand.Rand) {
	switch {
	case w.missing("cancelled"):
		w.cancelled(ctx, rng, false)
	case w.missing("do") || w.missing("reentry-refused"):
		w.do(ctx, rng, false)
	default:
		w.explicit(ctx, rng, w.missing("write") || w.missing("downgrade"), true)
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

// explicit takes the key with Lock or RLock (a wait of up to waitMax, or
// exactly waitMax if patient) or TryLock or TryRLock (not if patient), and
// holds it.
func (w *rwWorker) explicit(ctx context.Context, rng *rand.Rand, write, patient bool) {
	opt, fixed := lease(rng)
	try := !patient && rng.IntN(3) == 0
	wait := time.Duration(rng.Int64N(int64(w.waitMax)))
	if patient {
		wait = w.waitMax
	}
	opts := []dlock.Option{opt}
	if !try {
		opts = append(opts, dlock.WithWait(wait))
	}
	invoke := time.Now()
	h, err := w.take(ctx, write, try, opts...)
	if err != nil {
		w.rec.count("refused")
		return
	}
	w.rec.count(h.Mode().String())
	w.hold(ctx, rng, w.rec.track(w.id, h, invoke, time.Now(), write, 0, fmt.Sprintf("explicit(try=%v fixed=%v)", try, fixed)), h, fixed)
}

// take calls Lock, TryLock, RLock or TryRLock on the worker's key.
func (w *rwWorker) take(ctx context.Context, write, try bool, opts ...dlock.Option) (*dlock.RWHolding, error) {
	switch {
	case write && try:
		return w.l.TryLock(ctx, w.key, opts...)
	case write:
		return w.l.Lock(ctx, w.key, opts...)
	case try:
		return w.l.TryRLock(ctx, w.key, opts...)
	default:
		return w.l.RLock(ctx, w.key, opts...)
	}
}

// hold works inside h (downgrading a write holding at random), then kills
// a fixed-lease holding (its first, then one in three; never on a session
// store, where it would hold the key as long as the session lives) or
// releases it.
func (w *rwWorker) hold(ctx context.Context, rng *rand.Rand, t *tracked, h *dlock.RWHolding, fixed bool) {
	t.work(ctx, rng, w.session, func(int) {
		if h.Mode() == driver.RWWrite && rng.IntN(2) == 0 && t.phase(false) {
			w.rec.count("downgrade")
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_ = h.Downgrade(dctx)
		}
	})
	if fixed && !w.session && (!w.killed || rng.IntN(3) == 0) {
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
	opts := []dlock.Option{dlock.WithAutoRenew(300 * time.Millisecond), dlock.WithWait(time.Duration(rng.Int64N(int64(w.waitMax))))}
	var err error
	if write {
		err = w.l.Do(ctx, w.key, fn, opts...)
	} else {
		err = w.l.RDo(ctx, w.key, fn, opts...)
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
	h, err := w.take(fctx, write, true, dlock.WithTTL(200*time.Millisecond))
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
func (w *rwWorker) cancelled(ctx context.Context, rng *rand.Rand, write bool) {
	cctx, cancel := context.WithTimeout(ctx, time.Duration(2+rng.IntN(38))*time.Millisecond)
	defer cancel()
	invoke := time.Now()
	h, err := w.take(cctx, write, false, dlock.WithAutoRenew(300*time.Millisecond))
	if err != nil {
		w.rec.count("cancelled")
		return
	}
	w.hold(ctx, rng, w.rec.track(w.id, h, invoke, time.Now(), write, 0, "cancelled-wait"), h, false)
}

// writersIgnoreReaders is the negative control: its AcquireWrite takes a
// read holding and calls it a write, so writers share the key with
// readers and with each other.
type writersIgnoreReaders struct{ driver.RWMutex }

// Unwrap returns the store, whose notifications the waits still use.
func (s writersIgnoreReaders) Unwrap() driver.Store { return s.RWMutex }

func (s writersIgnoreReaders) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	g, err := s.AcquireRead(ctx, key, token, ttl)
	if err == nil {
		g.Mode, g.Readers = driver.RWWrite, 0
	}
	return g, err
}

// rwSpec is the read-write lock's traffic.
var rwSpec = famSpec{
	what: "read-write lock",
	open: func(st driver.Store, id int, env famEnv) (famWorker, error) {
		l, err := dlock.NewRWLocks(st.(driver.RWMutex))
		return &rwWorker{famEnv: env, id: id, l: l}, err
	},
	check:   checkRW,
	ops:     []string{"write", "read", "do", "downgrade", "cancelled", "reentry-refused"},
	expiry:  []string{"extend-shorter", "extend-longer", "killed"},
	shown:   func(hs []check.Holding) bool { return readerOverlaps(hs) > 0 },
	control: "control-writers-ignore-readers",
	broken:  func(st driver.Store) driver.Store { return writersIgnoreReaders{st.(driver.RWMutex)} },
	offers:  func(st driver.Store) bool { _, ok := st.(driver.RWMutex); return ok },
}

// checkRW counts writer overlaps, fence inversions and re-entries granted
// inside Do, and logs them with the first overlapping pairs; the traffic
// must show readers sharing the key.
func checkRW(t *testing.T, hs []check.Holding, counts map[string]int) int {
	over, inv, shared := check.WriterOverlaps(hs), check.FenceInversions(hs, true), readerOverlaps(hs)
	t.Logf("RESULT %s phases=%d %v writer-overlaps=%d fence-inversions=%d reader-overlaps=%d", t.Name(), len(hs), counts, over, inv, shared)
	for _, p := range check.WriterOverlapPairs(hs, 5) {
		t.Logf("overlap: %s | %s", phaseString(p[0]), phaseString(p[1]))
	}
	if shared == 0 {
		t.Errorf("no two read phases overlapped: the traffic did not share the key")
	}
	return over + inv + counts["reentry-granted"]
}

// R37. Invariant: read-write lock traffic on every store that has the
// primitive (rwTargets), under connection resets, held (lost) and dropped
// replies, keeps many readers or one writer: no write phase of a holding
// intersects another holding's phase while both holders take them to be
// valid, and fences follow real-time order (a write's above every earlier
// holding's, a read's above every earlier write's). The traffic mixes
// Lock, TryLock, RLock, TryRLock, Do and RDo (with a re-entry inside, which
// must be refused), Downgrade, waits cancelled after 2–40 ms and, on the
// stores with per-holding leases, Extend shorter and longer than the lease
// and holders killed (fixed lease, never released). Pass: zero violations.
// Negative control: control-writers-ignore-readers, the store with an
// AcquireWrite that takes a read holding, must show violations.
func TestRWTrafficZeroViolations(t *testing.T) {
	runFamily(t, rwTargets, rwSpec, composedSeed())
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
