package main

import (
	"context"
	"os"
	"testing"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

func TestMain(m *testing.M) {
	cmp.ServeChild(childEnv, runProc) // a process of the procs part
	os.Exit(m.Run())
}

// TestPartsRunOnRedis is the smoke check of the three parts, small and
// short (about 3 s): held leases stay held and show requests, heap and
// round trips; every queued waiter is granted; two processes on one key
// never overlap.
func TestPartsRunOnRedis(t *testing.T) {
	srv, err := start("redis")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	ctx := context.Background()
	lr, err := measureLeases(ctx, srv, 200, 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lr.Lost != 0 || lr.PerInterval <= 0 || lr.TripsPerInterval <= 0 || lr.BytesPerLease <= 0 {
		t.Errorf("leases: %+v", lr)
	}
	wr, err := measureWaiters(ctx, srv, 10, 300*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if wr.Done != 10 || wr.PerRelease <= 0 {
		t.Errorf("waiters: %+v", wr)
	}
	pt, err := measureProcs(srv.url, 2, 2, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Ops == 0 || pt.Overlaps != 0 || pt.Failures != 0 {
		t.Errorf("procs: %d ops, %d overlaps, %d failures (%s)", pt.Ops, pt.Overlaps, pt.Failures, pt.FirstErr)
	}
	t.Logf("leases %+v; waiters %+v; procs %d ops", lr, wr, pt.Ops)
}
