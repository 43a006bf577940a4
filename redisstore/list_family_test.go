package redisstore_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// listFamily returns the keys ListRW and ListPermits report under prefix,
// failing on a key reported twice.
func listFamily(t *testing.T, s *redisstore.Store, prefix string) (rw map[string]driver.RWInfo, sem map[string]driver.PermitInfo) {
	t.Helper()
	rw, sem = map[string]driver.RWInfo{}, map[string]driver.PermitInfo{}
	err := s.ListRW(testCtx(t), prefix, func(k string, in driver.RWInfo) bool {
		if _, dup := rw[k]; dup {
			t.Errorf("read-write lock %q reported twice", k)
		}
		rw[k] = in
		return true
	})
	if err != nil {
		t.Fatalf("ListRW(%q): %v", prefix, err)
	}
	err = s.ListPermits(testCtx(t), prefix, func(k string, in driver.PermitInfo) bool {
		if _, dup := sem[k]; dup {
			t.Errorf("semaphore %q reported twice", k)
		}
		sem[k] = in
		return true
	})
	if err != nil {
		t.Fatalf("ListPermits(%q): %v", prefix, err)
	}
	return rw, sem
}

// TestListRWAndPermitsReportLiveKeys: ListRW reports the read-write locks
// held (readers, a writer) or with a queued writer, ListPermits the
// semaphores with permits out, each as its Inspect reports it, under the
// prefix only; released keys, mutexes and the other primitive's keys are
// not reported (the control: the mutex's List reports the mutex).
func TestListRWAndPermitsReportLiveKeys(t *testing.T) {
	ctx := testCtx(t)
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	l, err := dlock.NewRWLocks(s)
	if err != nil {
		t.Fatal(err)
	}
	sems, err := dlock.NewSemaphores(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx); _ = sems.Close(ctx) })
	for _, k := range []string{"f:read", "f:read", "f:queued", "other:read"} {
		if _, err := l.RLock(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.TryLock(ctx, "f:queued"); err == nil {
		t.Fatal("a writer got in beside a reader")
	}
	if _, err := l.Lock(ctx, "f:write"); err != nil {
		t.Fatal(err)
	}
	gone, err := l.Lock(ctx, "f:gone")
	if err != nil {
		t.Fatal(err)
	}
	_ = gone.Release(ctx)
	if _, err := sems.Acquire(ctx, "f:pool", 3, 2); err != nil {
		t.Fatal(err)
	}
	p, err := sems.Acquire(ctx, "f:empty", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(ctx)
	if _, err := mustClient(t, s).TryLock(ctx, "f:mutex"); err != nil {
		t.Fatal(err)
	}
	rw, sem := listFamily(t, s, "f:")
	if keys := slices.Sorted(maps.Keys(rw)); !slices.Equal(keys, []string{"f:queued", "f:read", "f:write"}) {
		t.Fatalf("ListRW: %v", keys)
	}
	if in := rw["f:read"]; in.Mode != driver.RWRead || len(in.Holders) != 2 {
		t.Errorf("f:read: %+v, want two readers", in)
	}
	if in := rw["f:queued"]; in.WriterWaiting <= 0 || len(in.Holders) != 1 {
		t.Errorf("f:queued: %+v, want a reader and a queued writer", in)
	}
	if in := rw["f:write"]; in.Mode != driver.RWWrite || len(in.Holders) != 1 {
		t.Errorf("f:write: %+v, want the writer", in)
	}
	if keys := slices.Sorted(maps.Keys(sem)); !slices.Equal(keys, []string{"f:pool"}) || sem["f:pool"].Used != 2 || sem["f:pool"].Limit != 3 {
		t.Fatalf("ListPermits: %v %+v", keys, sem)
	}
	if _, ok := listAll(t, s, "f:")["f:mutex"]; !ok { // control
		t.Fatal("the mutex's List does not report f:mutex")
	}
}

// TestListRWScansEveryClusterPrimary: read-write locks and semaphores spread
// over three primaries are all listed.
func TestListRWScansEveryClusterPrimary(t *testing.T) {
	ctx := testCtx(t)
	_, rdb := newCluster(t)
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: "app:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	l, _ := dlock.NewRWLocks(s)
	sems, _ := dlock.NewSemaphores(s)
	t.Cleanup(func() { _ = l.Close(ctx); _ = sems.Close(ctx) })
	var want []string
	for i := range 20 {
		k := fmt.Sprintf("k%02d", i)
		if _, err := l.RLock(ctx, k); err != nil {
			t.Fatal(err)
		}
		if _, err := sems.Acquire(ctx, k, 2, 1); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	rw, sem := listFamily(t, s, "k")
	if keys := slices.Sorted(maps.Keys(rw)); !slices.Equal(keys, want) {
		t.Fatalf("ListRW: %v, want %v", keys, want)
	}
	if keys := slices.Sorted(maps.Keys(sem)); !slices.Equal(keys, want) {
		t.Fatalf("ListPermits: %v, want %v", keys, want)
	}
}
