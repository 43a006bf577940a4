package main

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/bench/internal/cmp"
	"example.com/dlock/internal/redisserver"
)

// TestOpenLoopOnRedis runs dlock's open loop briefly in two processes:
// every scheduled arrival is accounted for once (done, late or failed),
// none failed, nothing overlapped, and the counter reads back as the
// completed requests.
func TestOpenLoopOnRedis(t *testing.T) {
	srv, err := redisserver.StartProcess("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	sc := scenarios[slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.Name == "onekey-2x25" })]
	a := cmp.Arrivals{Rate: 200, Seed: uint64(time.Now().UnixNano())}
	t.Logf("seed %d", a.Seed)
	dur := 500 * time.Millisecond
	r, err := runJob(rdb, job{Scenario: sc, Lib: "dlock", Addr: srv.Addr(), Duration: dur, Open: &a, Dir: t.TempDir(), Tuning: defaultTuning})
	if err != nil {
		t.Fatal(err)
	}
	want := len(a.Schedule(0, dur)) + len(a.Schedule(1, dur))
	o := r.Open
	if o == nil || o.Ops+o.Late+o.Failures != int64(want) || len(o.Lat) != want || o.Failures != 0 || o.Overlaps != 0 {
		t.Fatalf("want %d arrivals accounted for, got %+v", want, o)
	}
	if r.Final != r.Expected || r.Expected != o.Ops {
		t.Errorf("counter %d, expected %d, completed %d", r.Final, r.Expected, o.Ops)
	}
}
