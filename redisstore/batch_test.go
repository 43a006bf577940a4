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

	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// gateHook holds every single (non-pipelined) call on a key containing
// "block" until open is closed, and records the size and deadline of each
// EVALSHA pipeline. If pipeOpen is not nil, pipelines wait for it too.
type gateHook struct {
	open      chan struct{}
	held      atomic.Int32
	pipelines chan int
	deadlines chan pipeDeadline
	pipeOpen  chan struct{}
	pipeHeld  atomic.Int32
}

type pipeDeadline struct {
	at time.Time
	ok bool
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
			at, ok := ctx.Deadline()
			h.deadlines <- pipeDeadline{at, ok}
			if h.pipeOpen != nil {
				h.pipeHeld.Add(1)
				<-h.pipeOpen
			}
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
	hook := &gateHook{open: make(chan struct{}), pipelines: make(chan int, 100), deadlines: make(chan pipeDeadline, 100)}
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
	testkit.WaitFor(t, 10*time.Second, "the flight slots to be held", func() bool { return hook.held.Load() == int32(maxInflight) })
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

// within receives the error of what, failing the test if it takes more than
// a few seconds (what should return at once).
func within(t *testing.T, errc <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// Calls made while the flight slots are busy go out as one pipeline, each
// with its own reply: the keys' last fences are seeded apart, so a reply
// given to the wrong caller shows as a wrong fence. The scripts are flushed
// first: every call of the batch must fall back to EVAL on its own.
func TestConcurrentCallsShareOnePipeline(t *testing.T) {
	st := newStaged(t, 0)
	ctx := context.Background()
	const n = 8
	for i := range n {
		lock, _ := st.s.Keys("k" + strconv.Itoa(i))
		if err := st.rdb.Set(ctx, lock, tombstone(seeded+100*uint64(i)), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	grants := make([]driver.Grant, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { grants[i], errs[i] = st.s.Acquire(ctx, "k"+strconv.Itoa(i), "t"+strconv.Itoa(i), time.Minute) })
	}
	testkit.WaitFor(t, 10*time.Second, "the calls to queue", func() bool { return st.queued() == n })
	close(st.hook.open)
	wg.Wait()
	st.wg.Wait()
	for i := range n {
		if errs[i] != nil || grants[i].Fence != seeded+uint64(100*i+1) || grants[i].Holds != 1 {
			t.Errorf("call %d: %+v %v, want fence %d, one hold", i, grants[i], errs[i], seeded+uint64(100*i+1))
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

// A call whose context ends while it is queued returns at once and is never
// sent; the rest of its batch goes out without it. A call whose context
// ended before it queued is not queued at all.
func TestQueuedCallCancelledIsNotSent(t *testing.T) {
	st := newStaged(t, 0)
	ctx := context.Background()
	cctx, cancel := context.WithCancel(ctx)
	cerr := make(chan error, 1)
	go func() { _, err := st.s.Acquire(cctx, "cancelled", "c", time.Minute); cerr <- err }()
	testkit.WaitFor(t, 10*time.Second, "the first call to queue", func() bool { return st.queued() == 1 })
	var wg sync.WaitGroup
	var ferr error
	wg.Go(func() { _, ferr = st.s.Acquire(ctx, "follower", "f", time.Minute) })
	testkit.WaitFor(t, 10*time.Second, "the second call to queue", func() bool { return st.queued() == 2 })
	cancel()
	if err := within(t, cerr, "a cancelled queued call"); !errors.Is(err, context.Canceled) { // the gate is still shut
		t.Fatalf("queued call cancelled: %v, want context.Canceled", err)
	}
	if _, err := st.s.Acquire(cctx, "late", "x", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with an ended context = %v, want context.Canceled", err)
	}
	close(st.hook.open)
	wg.Wait()
	if ferr != nil {
		t.Fatalf("the other call of the batch failed: %v", ferr)
	}
	if got := <-st.hook.pipelines; got != 1 {
		t.Fatalf("the batch carried %d calls, want only the one still waiting", got)
	}
	for _, key := range []string{"cancelled", "late"} {
		if info, err := st.s.Inspect(ctx, key); err != nil || info.Held {
			t.Fatalf("%s: a call cancelled before it was sent changed the store: %+v %v", key, info, err)
		}
	}
}

// A batch is sent with the latest deadline of its calls, or none if one of
// them has none, so that no call's deadline is cut short by another's.
func TestBatchTakesTheLatestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deadlines []time.Duration // 0: no deadline
	}{
		{"latest", []time.Duration{time.Minute, time.Hour, 2 * time.Minute}},
		{"none", []time.Duration{time.Minute, 0, time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStaged(t, 0)
			var want pipeDeadline
			var wg sync.WaitGroup
			for i, d := range tc.deadlines {
				ctx := context.Background()
				if d > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, d)
					defer cancel()
					if at, _ := ctx.Deadline(); !want.ok || at.After(want.at) {
						want = pipeDeadline{at, true}
					}
				}
				wg.Go(func() {
					if _, err := st.s.Acquire(ctx, "d"+strconv.Itoa(i), "t", time.Minute); err != nil {
						t.Errorf("call %d: %v", i, err)
					}
				})
				testkit.WaitFor(t, 10*time.Second, "the call to queue", func() bool { return st.queued() == i+1 })
			}
			if tc.name == "none" {
				want = pipeDeadline{}
			}
			close(st.hook.open)
			wg.Wait()
			if got := <-st.hook.deadlines; got.ok != want.ok || !got.at.Equal(want.at) {
				t.Fatalf("batch deadline %+v, want %+v", got, want)
			}
		})
	}
}

// A call whose context ends while its batch is on the wire returns at once,
// like a call that timed out: its script may still run (here it does).
func TestCallOnTheWireReturnsWhenItsContextEnds(t *testing.T) {
	st := newStaged(t, 0)
	st.hook.pipeOpen = make(chan struct{})
	ctx := context.Background()
	var wg sync.WaitGroup
	var lerr error
	wg.Go(func() { _, lerr = st.s.Acquire(ctx, "leader", "l", time.Minute) })
	testkit.WaitFor(t, 10*time.Second, "the first call to queue", func() bool { return st.queued() == 1 })
	cctx, cancel := context.WithCancel(ctx)
	cerr := make(chan error, 1)
	go func() { _, err := st.s.Acquire(cctx, "other", "o", time.Minute); cerr <- err }()
	testkit.WaitFor(t, 10*time.Second, "the second call to queue", func() bool { return st.queued() == 2 })
	close(st.hook.open)
	testkit.WaitFor(t, 10*time.Second, "the batch to be on the wire", func() bool { return st.hook.pipeHeld.Load() == 1 })
	cancel()
	if err := within(t, cerr, "a cancelled call on the wire"); !errors.Is(err, context.Canceled) {
		t.Fatalf("call on the wire cancelled: %v, want context.Canceled", err)
	}
	close(st.hook.pipeOpen)
	wg.Wait()
	if lerr != nil {
		t.Fatalf("the batch's leader: %v", lerr)
	}
	if info, err := st.s.Inspect(ctx, "other"); err != nil || info.Token != "o" {
		t.Fatalf("the cancelled call's script was sent and should have run: %+v %v", info, err)
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
	testkit.WaitFor(t, 10*time.Second, "the calls to queue", func() bool { return st.queued() == len(errs) })
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
		lock, _ := st.s.Keys("k" + strconv.Itoa(i))
		if err := rdb.Set(ctx, lock, tombstone(seeded+100*uint64(i)), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	grants := make([]driver.Grant, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { grants[i], errs[i] = st.s.Acquire(ctx, "k"+strconv.Itoa(i), "t", time.Minute) })
	}
	testkit.WaitFor(t, 10*time.Second, "the calls to queue", func() bool { return st.queued() == n })
	close(st.hook.open)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || grants[i].Fence != seeded+uint64(100*i+1) {
			t.Errorf("call %d: %+v %v, want fence %d", i, grants[i], errs[i], seeded+uint64(100*i+1))
		}
		if err := st.s.Release(ctx, "k"+strconv.Itoa(i), "t"); err != nil {
			t.Errorf("release %d: %v", i, err)
		}
	}
	if got := <-st.hook.pipelines; got != n {
		t.Fatalf("first pipeline carried %d calls, want the %d queued", got, n)
	}
}

// With NoBatching every call goes out on its own, however many are in
// flight: a call made while the flight slots are held completes at once.
func TestNoBatchingSendsEachCallAlone(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	hook := &gateHook{open: make(chan struct{}), pipelines: make(chan int, 100), deadlines: make(chan pipeDeadline, 100)}
	rdb.AddHook(hook)
	s, err := New(rdb, &Options{NoBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { close(hook.open); wg.Wait() })
	for i := range maxInflight + 2 {
		wg.Go(func() { _, _ = s.Acquire(context.Background(), "block"+strconv.Itoa(i), "b", time.Minute) })
	}
	testkit.WaitFor(t, 10*time.Second, "the calls to be held", func() bool { return hook.held.Load() == int32(maxInflight+2) })
	errc := make(chan error, 1)
	go func() { _, err := s.Acquire(context.Background(), "free", "t", time.Minute); errc <- err }()
	if err := within(t, errc, "an acquire beside held calls"); err != nil {
		t.Fatal(err)
	}
	if len(hook.pipelines) != 0 {
		t.Fatalf("%d pipelines sent, want none", len(hook.pipelines))
	}
}
