package zkstore_test

import (
	"testing"
	"time"

	"example.com/dlock/zkstore"
)

// TestFamilyRequestCounts pins the requests of uncontended read-write lock
// and semaphore cycles (acquire then release, on a path that exists):
// a read 4 + 1 (list, create, list, setData; delete), a write 3 + 1
// (create, list, setData; delete), one permit 5 + 1 (mutex create and
// list, the leases' list and data, the multi that also deletes the mutex
// node; the multi delete), each request one round trip except the leases'
// two, sent together: 4 + 1 round trips.
func TestFamilyRequestCounts(t *testing.T) {
	s := dial(t, uniq(t), 10*time.Second, server(t).Addrs()...)
	ctx := ctxT(t, 30*time.Second)
	warm := tok() // creates the paths
	if _, err := s.AcquireRead(ctx, "k", warm, time.Minute); err != nil {
		t.Fatal(err)
	}
	mustRelease(t, s, "k", warm)
	if _, err := s.AcquirePermits(ctx, "k", warm, 2, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleasePermits(ctx, "k", warm); err != nil {
		t.Fatal(err)
	}
	count := func(what string, acquire func(tk string) error, release func(tk string) error, wantAcq, wantRel int64) {
		t.Helper()
		tk := tok()
		before := zkstore.Requests(s)
		if err := acquire(tk); err != nil {
			t.Fatal(err)
		}
		mid := zkstore.Requests(s)
		if err := release(tk); err != nil {
			t.Fatal(err)
		}
		acq, rel := mid-before, zkstore.Requests(s)-mid
		t.Logf("%s: %d requests to acquire, %d to release", what, acq, rel)
		if acq != wantAcq || rel != wantRel {
			t.Errorf("%s: %d + %d requests, want %d + %d", what, acq, rel, wantAcq, wantRel)
		}
	}
	releaseRW := func(tk string) error { return s.ReleaseRW(ctx, "k", tk) }
	count("read", func(tk string) error { _, err := s.AcquireRead(ctx, "k", tk, time.Minute); return err }, releaseRW, 4, 1)
	count("write", func(tk string) error { _, err := s.AcquireWrite(ctx, "k", tk, time.Minute); return err }, releaseRW, 3, 1)
	count("permit", func(tk string) error { _, err := s.AcquirePermits(ctx, "k", tk, 2, 1, time.Minute); return err },
		func(tk string) error { return s.ReleasePermits(ctx, "k", tk) }, 5, 1)
}
