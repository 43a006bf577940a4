package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// The read-write lock's calls made while the flight slots are busy
// (AcquireRead, AcquireWrite, ExtendRW, ReleaseRW) queue and go out as one
// pipeline, each with its own reply, as the mutex's do. Without the shared
// path they would go out alone and never queue.
func TestRWCallsShareOnePipeline(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	setup, err := New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := setup.AcquireRead(ctx, "ext", "e", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.AcquireWrite(ctx, "rel", "x", time.Minute); err != nil {
		t.Fatal(err)
	}
	st := stage(t, rdb, true)
	var (
		wg          sync.WaitGroup
		read, write driver.RWGrant
		extended    driver.RWGrant
		errs        [4]error
	)
	wg.Go(func() { read, errs[0] = st.s.AcquireRead(ctx, "r", "a", time.Minute) })
	wg.Go(func() { write, errs[1] = st.s.AcquireWrite(ctx, "w", "b", time.Minute) })
	wg.Go(func() { extended, errs[2] = st.s.ExtendRW(ctx, "ext", "e", 2*time.Minute) })
	wg.Go(func() { errs[3] = st.s.ReleaseRW(ctx, "rel", "x") })
	testkit.WaitFor(t, 10*time.Second, "the read-write calls to queue", func() bool { return st.queued() == 4 })
	close(st.hook.open)
	wg.Wait()
	st.wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if read.Mode != driver.RWRead || write.Mode != driver.RWWrite || read.Fence == 0 || write.Fence == 0 {
		t.Fatalf("grants %+v and %+v, want a read and a write with fences", read, write)
	}
	if extended.Fence != ext.Fence || extended.Mode != driver.RWRead {
		t.Fatalf("extend answered %+v, want the reader's fence %d", extended, ext.Fence)
	}
	info, err := st.s.InspectRW(ctx, "rel")
	if err != nil || len(info.Holders) != 0 {
		t.Fatalf("released key holds %+v %v, want nothing", info, err)
	}
	if got := <-st.hook.pipelines; got != 4 {
		t.Fatalf("first pipeline carried %d calls, want the 4 queued", got)
	}
}
