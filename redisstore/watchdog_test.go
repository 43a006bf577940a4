package redisstore_test

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
)

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// One client holds many locks with automatic renewal: none is lost, and the
// renewals travel in pipelined batches (round trips ≈ ticks, not leases).
// The full-scale version (10 000 locks, CPU share) is the watchdog-10000
// scenario of the bench module.
func TestRenewalOfManyLocksIsBatched(t *testing.T) {
	srv, _ := newRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := &roundTrips{}
	rdb.AddHook(rt)
	st := newStore(t, rdb)
	const n, lease, hold = 2000, 1500 * time.Millisecond, 2400 * time.Millisecond // a 1.5 s lease leaves 1 s of slack per renewal on a loaded machine
	c, err := dlock.New(st, dlock.WithAutoRenew(lease))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	ctx := testCtx(t)
	leases := make([]*dlock.Lease, n)
	for i := range leases {
		if leases[i], err = c.Lock(ctx, "wd:"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	rt0, cpu0, t0 := rt.n.Load(), processCPU(), time.Now()
	time.Sleep(hold) // holding is what is measured: renewal runs meanwhile
	trips, cpu, wall := rt.n.Load()-rt0, processCPU()-cpu0, time.Since(t0)
	t.Logf("%d locks for %v: %d renewal round trips, process CPU %.1f%% of one core", n, wall.Round(time.Millisecond), trips, 100*cpu.Seconds()/wall.Seconds())
	// Leases due within a tenth of a period of each other share a pipeline,
	// so a batch holds many leases: at least 20 on average here (a loop
	// renewing one by one would need n per period).
	periods := int64(hold / (lease / 3))
	if trips < periods/2 || trips*20 > n*periods {
		t.Errorf("%d round trips for %d renewal periods of %d leases: want batches of 20 or more", trips, periods, n)
	}
	pipe := rdb.Pipeline()
	owners := make([]*redis.StringCmd, n)
	for i, l := range leases {
		lock, _ := st.Keys(l.Key())
		owners[i] = pipe.Get(ctx, lock) // "<holds>:<fence>:<call id>:<owner>"
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) { // a missing key is judged below
		t.Fatal(err)
	}
	for i, l := range leases {
		if l.Err() != nil || !strings.HasPrefix(owners[i].Val(), "1:") || !strings.HasSuffix(owners[i].Val(), ":"+l.Token()) {
			t.Fatalf("lease %d lost while renewing (key value %q, lease error %v)", i, owners[i].Val(), l.Err())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
