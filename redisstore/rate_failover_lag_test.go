package redisstore_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
)

// lagLimit is 20 a second with a burst of 400: admissions all the time,
// so that the lag window holds some, and a burst that takes 20 s to come
// back, so that the TATs the failover loses are still ahead of the clock
// when the replica is promoted a few seconds later (with a shorter one the
// budget refills during the failover and the loss is not seen).
var lagLimit = driver.RateLimit{Rate: 20, Period: time.Second, Burst: 400}

// span is when an admitted call was sent and answered.
type span struct{ sent, answered time.Time }

// testRateFailoverLagging kills the primary while the key is hammered with
// the replica behind by a seeded number of admissions, and checks the
// documented bound: the over-admission is at most what the lag window
// admitted (counting the admissions whose call straddled the cut), plus one
// the old primary may have made as it died, whose answer was lost (so the
// test counted it nowhere; admissions are 50 ms apart, so at most one). It
// is also at least what the window surely admitted, less 2: the rounding of
// elapsed/interval, and the time from start to the first decision and from
// the last to the end (under an interval), which the bound counts and
// nobody could use. That side shows the measurement sees the loss; without
// the cut it fails.
func testRateFailoverLagging(t *testing.T) {
	rng := rand.New(rand.NewPCG(faulttest.Seed(t, "DLOCK_RATE_FAILOVER_SEED"), 0))
	behind := 10 + rng.IntN(16) // admissions the replica misses: 0.5 to 1.25 s at 20/s
	steady := 5 + rng.IntN(11)  // admissions after the burst, replicated, before the cut
	sn := redisserver.StartSentinel(t)
	s := newStore(t, newFailoverClient(t, sn))
	var mu sync.Mutex
	var spans []span
	admit := func(sent, answered time.Time) {
		mu.Lock()
		spans = append(spans, span{sent, answered})
		mu.Unlock()
	}
	ctx := testCtx(t)
	if _, err := s.AllowN(ctx, "failover-lag-warm", lagLimit, 1); err != nil { // dials, so the first decision comes soon after start
		t.Fatal(err)
	}
	start, stop := time.Now(), make(chan struct{})
	admitted, calls, errs, wait := hammer(ctx, s, "failover-lag", lagLimit, 8, stop, admit)
	waitAtLeast(t, admitted, int64(lagLimit.Burst+steady))
	cutStart := time.Now()
	cutReplication(t, sn)
	cutDone := time.Now()
	waitAtLeast(t, admitted, admitted.Load()+int64(behind))
	killed, promoted := failOver(t, sn, calls, stop, wait)
	elapsed := time.Since(start)
	mu.Lock()
	lostLo, straddled := lagWindow(spans, cutStart, cutDone, killed)
	mu.Unlock()
	bound := lagLimit.Burst + int(elapsed/lagLimit.Interval())
	over := int(admitted.Load()) - bound
	t.Logf("%d admitted over %v (%d calls failed; lag window %v, promoted %v after the kill); bound without failover %d: over-admission %d; the lag window admitted %d to %d (documented bound: what it admitted)",
		admitted.Load(), elapsed.Round(time.Millisecond), errs.Load(), killed.Sub(cutDone).Round(time.Millisecond),
		promoted.Sub(killed).Round(time.Millisecond), bound, over, lostLo, lostLo+straddled)
	if over > lostLo+straddled+1 {
		t.Errorf("over-admission %d above the bound: the lag window admitted at most %d (+1 unanswered as the primary died)", over, lostLo+straddled)
	}
	if over < lostLo-2 {
		t.Errorf("over-admission %d, but the lag window admitted at least %d: the loss was not seen", over, lostLo)
	}
}

// cutReplication puts the replica behind from now on: it stops the
// replica (so it cannot reconnect and resync) and drops its link, so the
// primary's later writes reach it never. What the primary had sent before
// waits in the replica's socket and is applied once it resumes.
func cutReplication(t *testing.T, sn *redisserver.Sentinel) {
	t.Helper()
	sn.Replica().Pause()
	if _, err := sn.Primary().Do("CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatal(err)
	}
}

// lagWindow counts the admissions the old primary made after the cut:
// lost, those sent after the cut was done and before the kill (the old
// primary decided them, and the replica never saw them), and straddled,
// those sent before the cut was done but answered after it began (they
// may have been decided on either side of it).
func lagWindow(spans []span, cutStart, cutDone, killed time.Time) (lost, straddled int) {
	for _, sp := range spans {
		switch {
		case !sp.sent.Before(cutDone) && sp.sent.Before(killed):
			lost++
		case sp.sent.Before(cutDone) && sp.answered.After(cutStart):
			straddled++
		}
	}
	return lost, straddled
}
