package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
)

// gateHook holds every single (non-pipelined) call on a key containing
// "block" until open is closed, and records the size of each EVALSHA
// pipeline.
type gateHook struct {
	open      chan struct{}
	held      atomic.Int32
	pipelines chan int
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 3 && strings.Contains(fmt.Sprint(a[3]), "block") {
			h.held.Add(1)
			<-h.open
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() == "evalsha" { // not go-redis's own connection setup
			h.pipelines <- len(cmds)
		}
		return next(ctx, cmds)
	}
}

// staged is a store whose flight slots are all taken by calls held at the
// gate, so that further calls queue up in one batch.
type staged struct {
	s    *Store
	rdb  redis.UniversalClient
	srv  *redisserver.Server // nil for a Cluster
	hook *gateHook
	wg   sync.WaitGroup
}

func newStaged(t *testing.T, readTimeout time.Duration) *staged {
	t.Helper()
	srv := redisserver.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, PoolSize: 64, ReadTimeout: readTimeout})
	t.Cleanup(func() { _ = rdb.Close() })
	st := stage(t, rdb, readTimeout == 0)
	st.srv = srv
	return st
}

// stage takes the flight slots of a new store on rdb with held calls; they
// must succeed once released if mustSucceed.
func stage(t *testing.T, rdb redis.UniversalClient, mustSucceed bool) *staged {
	t.Helper()
	hook := &gateHook{open: make(chan struct{}), pipelines: make(chan int, 100)}
	rdb.AddHook(hook)
	s, err := New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &staged{s: s, rdb: rdb, hook: hook}
	for i := range maxInflight {
		st.wg.Go(func() {
			_, err := s.Acquire(context.Background(), "block"+strconv.Itoa(i), "b", time.Minute)
			if err != nil && mustSucceed {
				t.Errorf("blocking acquire: %v", err)
			}
		})
	}
	waitFor(t, "the flight slots to be held", func() bool { return hook.held.Load() == int32(maxInflight) })
	t.Cleanup(func() {
		select {
		case <-hook.open:
		default:
			close(hook.open)
		}
		st.wg.Wait()
	})
	return st
}

// queued reports how many calls wait in the next batch.
func (st *staged) queued() int {
	st.s.batch.mu.Lock()
	defer st.s.batch.mu.Unlock()
	if st.s.batch.next == nil {
		return 0
	}
	return len(st.s.batch.next.calls)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling, not synchronising
	}
}

// Calls made while the flight slots are busy go out as one pipeline, each
// with its own reply: the keys' fence counters are seeded apart, so a reply
// given to the wrong caller shows as a wrong fence. The scripts are flushed
// first: every call of the batch must fall back to EVAL on its own.
func TestConcurrentCallsShareOnePipeline(t *testing.T) {
	st := newStaged(t, 0)
	ctx := context.Background()
	const n = 8
	for i := range n {
		_, fence := st.s.Keys("k" + strconv.Itoa(i))
		if err := st.rdb.Set(ctx, fence, 100*i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	grants := make([]dlock.Grant, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { grants[i], errs[i] = st.s.Acquire(ctx, "k"+strconv.Itoa(i), "t"+strconv.Itoa(i), time.Minute) })
	}
	waitFor(t, "the calls to queue", func() bool { return st.queued() == n })
	close(st.hook.open)
	wg.Wait()
	st.wg.Wait()
	for i := range n {
		if errs[i] != nil || grants[i].Fence != uint64(100*i+1) || grants[i].Holds != 1 {
			t.Errorf("call %d: %+v %v, want fence %d, one hold", i, grants[i], errs[i], 100*i+1)
		}
		info, err := st.s.Inspect(ctx, "k"+strconv.Itoa(i))
		if err != nil || info.Token != "t"+strconv.Itoa(i) {
			t.Errorf("key %d held by %+v %v, want its caller", i, info, err)
		}
	}
	if got := <-st.hook.pipelines; got != n {
		t.Fatalf("first pipeline carried %d calls, want the %d queued", got, n)
	}
}

// The batch goes out without its first caller's cancellation: a caller
// whose context ends while queued must not fail the others. A call whose
// context ended before it queued is not sent at all.
func TestBatchSurvivesItsLeadersCancellation(t *testing.T) {
	st := newStaged(t, 0)
	ctx := context.Background()
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var lerr error
	wg.Go(func() { _, lerr = st.s.Acquire(lctx, "leader", "l", time.Minute) })
	waitFor(t, "the leader to queue", func() bool { return st.queued() == 1 })
	var ferr error
	wg.Go(func() { _, ferr = st.s.Acquire(ctx, "follower", "f", time.Minute) })
	waitFor(t, "the follower to queue", func() bool { return st.queued() == 2 })
	cancel()
	if _, err := st.s.Acquire(lctx, "late", "x", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with an ended context = %v, want context.Canceled", err)
	}
	close(st.hook.open)
	wg.Wait()
	if ferr != nil {
		t.Fatalf("follower failed with its leader's cancellation: %v", ferr)
	}
	if lerr != nil {
		t.Fatalf("leader's call was sent but reported %v", lerr)
	}
	if info, err := st.s.Inspect(ctx, "late"); err != nil || info.Held {
		t.Fatalf("a call cancelled before it queued changed the store: %+v %v", info, err)
	}
}

// A failed pipeline fails each of its calls with the error, and the next
// calls go through once the server is back.
func TestBatchErrorReachesEveryCall(t *testing.T) {
	st := newStaged(t, 500*time.Millisecond)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = st.s.Acquire(ctx, "e"+strconv.Itoa(i), "t", time.Minute) })
	}
	waitFor(t, "the calls to queue", func() bool { return st.queued() == len(errs) })
	st.srv.Pause() // every call now times out on its read
	close(st.hook.open)
	wg.Wait()
	st.srv.Resume()
	st.wg.Wait()
	for i, err := range errs {
		var ne net.Error
		if err == nil || !errors.As(err, &ne) {
			t.Errorf("call %d during a pause: %v, want a network error", i, err)
		}
	}
	if _, err := st.s.Acquire(ctx, "after", "t", time.Minute); err != nil {
		t.Fatalf("acquire after the pause: %v", err)
	}
}

// In a Cluster, one batch holds keys of every node: go-redis splits the
// pipeline by slot, and each caller still gets its own key's reply.
func TestBatchSpansClusterNodes(t *testing.T) {
	cl := redisserver.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	st := stage(t, rdb, true)
	const n = 12 // keys spread over the three nodes
	for i := range n {
		_, fence := st.s.Keys("k" + strconv.Itoa(i))
		if err := rdb.Set(ctx, fence, 100*i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	grants := make([]dlock.Grant, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { grants[i], errs[i] = st.s.Acquire(ctx, "k"+strconv.Itoa(i), "t", time.Minute) })
	}
	waitFor(t, "the calls to queue", func() bool { return st.queued() == n })
	close(st.hook.open)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || grants[i].Fence != uint64(100*i+1) {
			t.Errorf("call %d: %+v %v, want fence %d", i, grants[i], errs[i], 100*i+1)
		}
		if err := st.s.Release(ctx, "k"+strconv.Itoa(i), "t"); err != nil {
			t.Errorf("release %d: %v", i, err)
		}
	}
	if got := <-st.hook.pipelines; got != n {
		t.Fatalf("first pipeline carried %d calls, want the %d queued", got, n)
	}
}
