package redlock_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
	"example.com/dlock/redlock"
	"example.com/dlock/storetest"
)

// conformanceOpts tolerates a loaded CI machine (2 cores, the race
// detector, other packages' tests in parallel); the suite's short-TTL cases
// still get TTL/3.
var conformanceOpts = &redlock.Options{NodeTimeout: 250 * time.Millisecond}

func TestConformanceFiveNodes(t *testing.T) {
	c := startCluster(t, 5)
	s := c.store(t, conformanceOpts)
	if !s.Fencing() || s.Quorum() != 3 {
		t.Fatalf("Fencing() = %v, Quorum() = %d; want true, 3", s.Fencing(), s.Quorum())
	}
	storetest.Run(t, func(t *testing.T) driver.Mutex { return s })
}

func TestConformanceThreeNodesOneDown(t *testing.T) {
	c := startCluster(t, 3)
	c.servers[2].Kill()
	s := c.store(t, conformanceOpts)
	storetest.Run(t, func(t *testing.T) driver.Mutex { return s })
}

func TestNewRejectsBadInput(t *testing.T) {
	ok := []driver.Mutex{memstore.New(nil), memstore.New(nil), memstore.New(nil)}
	cases := map[string]struct {
		nodes []driver.Mutex
		opts  *redlock.Options
	}{
		"no nodes":         {nil, nil},
		"nil node":         {[]driver.Mutex{ok[0], nil, ok[2]}, nil},
		"negative timeout": {ok, &redlock.Options{NodeTimeout: -1}},
		"drift too big":    {ok, &redlock.Options{DriftFactor: 0.5}},
		"negative drift":   {ok, &redlock.Options{DriftFactor: -0.1}},
	}
	for name, tc := range cases {
		if _, err := redlock.New(tc.nodes, tc.opts); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := redlock.NewRedis(nil, "", nil); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("NewRedis(nil) = %v, want ErrInvalid", err)
	}
	s, err := redlock.New(ok, nil)
	if err != nil || s.Fencing() {
		t.Fatalf("New(memstores) = %v, fencing %v; want no error, fencing off (memstore cannot raise fences)", err, s.Fencing())
	}
}

func TestInspectReportsTheMajoritysView(t *testing.T) {
	c := startCluster(t, 3)
	s := c.store(t, conformanceOpts)
	locks, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	l, err := locks.Lock(ctx, "inspected", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Inspect(ctx, "inspected")
	// Info.Fence is the last fence any node issued: a node whose grant came
	// after the majority decided has its own, later clock's fence (fences
	// are max(last + 1, TIME in µs) per node), so it is at least the lease's.
	if err != nil || !info.Held || info.Token != l.Token() || info.Holds != 1 || info.Fence < l.Fence() ||
		info.Remaining < 50*time.Second {
		t.Fatalf("Inspect = %+v, %v; want held by the lease, fence >= %d", info, err, l.Fence())
	}
	c.servers[0].Kill()
	if info, err = s.Inspect(ctx, "inspected"); err != nil || !info.Held {
		t.Fatalf("Inspect with one of three down = %+v, %v", info, err)
	}
	c.servers[1].Kill()
	if _, err = s.Inspect(ctx, "inspected"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Inspect with two of three down = %v, want ErrNoQuorum", err)
	}
}
