package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/stepcall"
	"example.com/dlock/redisstore"
)

// replayRig is a store whose client reaches Redis through a fault proxy,
// with go-redis's retries as given, so that a call whose reply the proxy
// drops and whose connection it then cuts is resent; direct is a store on
// the same server without the proxy, to watch and to play the other
// clients.
type replayRig struct {
	proxy         *faultproxy.Proxy
	store, direct *redisstore.Store
	rdb           *redis.Client
}

func newReplayRig(t *testing.T, maxRetries int) *replayRig {
	srv, direct := newRedis(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: maxRetries, ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	r := &replayRig{proxy: p, store: newStore(t, rdb), direct: newStore(t, direct), rdb: direct}
	// Load the scripts first: a NOSCRIPT reply dropped by the proxy would
	// keep EVALSHA from ever falling back to EVAL.
	ctx := testCtx(t)
	_, err = r.store.Acquire(ctx, "warm", "a", time.Minute)
	if err == nil {
		_, err = r.store.Transfer(ctx, "warm", "a", "b", time.Minute)
	}
	if err = errors.Join(err, stepcall.ReleaseWrite(ctx, r.store, "warm", "b", "warm-data", "x")); err != nil {
		t.Fatal(err)
	}
	return r
}

// dropFirstReply runs op while the proxy drops every reply. Once landed
// reports that the first run took effect on the server, it runs between
// (other clients acting before the resend), then cuts the connection (the
// client sees it broken and go-redis resends the call on a new one, if its
// retries are on), lets replies through again and returns op's result and
// whether the server ran the call again.
func (r *replayRig) dropFirstReply(t *testing.T, op func() error, landed func() bool, between func()) (resent bool, err error) {
	t.Helper()
	r.proxy.Blackhole(faultproxy.Downstream, true)
	defer r.proxy.Blackhole(faultproxy.Downstream, false)
	done := make(chan error, 1)
	go func() { done <- op() }()
	r.waitServer(t, "the first run", done, landed)
	between()
	calls := r.scriptCalls(t)
	r.proxy.ResetAll() // first: the dropped reply must not get through
	r.proxy.Blackhole(faultproxy.Downstream, false)
	select {
	case err = <-done:
		return r.scriptCalls(t) > calls, err
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return within 10 s")
	}
	return false, nil
}

// waitServer polls cond for up to 5 s; op's early return fails the test.
func (r *replayRig) waitServer(t *testing.T, what string, done <-chan error, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("the call returned (%v) before %s reached the server", err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach the server within 5 s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// scriptCalls returns how many EVALSHA calls the server has run.
func (r *replayRig) scriptCalls(t *testing.T) int {
	t.Helper()
	s, err := r.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(s, "cmdstat_evalsha:calls=")
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}

func (r *replayRig) info(t *testing.T, key string) driver.Info {
	t.Helper()
	i, err := r.direct.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// TestS5ResentCallsAnswerWhatTheFirstRunDid: a call whose reply is lost and
// that go-redis resends (MaxRetries 3, a broken connection) must answer what
// its first run did, not run again (issue 13, S5: "Commit("9") = lock lost;
// stock is now 9"; a resent non-final release freed the key under its outer
// holder). Every case changes the lock between the first run and the
// resend, as other clients would.
func TestS5ResentCallsAnswerWhatTheFirstRunDid(t *testing.T) {
	r := newReplayRig(t, 3)
	ctx := testCtx(t)
	nothing := func() {}
	drop := func(op func() error, landed func() bool, between func()) error {
		t.Helper()
		resent, err := r.dropFirstReply(t, op, landed, between)
		if !resent {
			t.Errorf("go-redis did not resend the call (%v): the case tested nothing", err)
		}
		return err
	}

	// Commit (a final release with a write); another client takes the lock
	// before the resend.
	if _, err := r.store.Acquire(ctx, "commit", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	err := drop(func() error { return stepcall.ReleaseWrite(ctx, r.store, "commit", "a", "stock", "9") },
		func() bool { return r.rdb.Get(ctx, "stock").Val() == "9" },
		func() {
			if _, err := r.direct.Acquire(ctx, "commit", "b", time.Minute); err != nil {
				t.Errorf("the next client: %v", err)
			}
		})
	if err != nil {
		t.Errorf("Commit whose write landed = %v, want success", err)
	}
	if i := r.info(t, "commit"); !i.Held || i.Token != "b" || i.Holds != 1 {
		t.Errorf("after the resent Commit: %+v, want b's holding untouched", i)
	}

	// A non-final release: holds 2 -> 1 must not become 1 -> 0.
	for range 2 {
		if _, err := r.store.Acquire(ctx, "nested", "a", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	err = drop(func() error { return r.store.Release(ctx, "nested", "a") },
		func() bool { return r.info(t, "nested").Holds == 1 }, nothing)
	if i := r.info(t, "nested"); err != nil || !i.Held || i.Token != "a" || i.Holds != 1 {
		t.Errorf("resent inner release = %v, lock %+v; want success and the outer hold kept", err, i)
	}

	// A transfer; the new holder releases and a third client takes the
	// lock before the resend.
	if _, err := r.store.Acquire(ctx, "moved", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	var g driver.Grant
	var fence uint64
	err = drop(func() (err error) { g, err = r.store.Transfer(ctx, "moved", "a", "b", time.Minute); return err },
		func() bool { i := r.info(t, "moved"); fence = i.Fence; return i.Token == "b" },
		func() {
			err := errors.Join(r.direct.Release(ctx, "moved", "b"))
			if _, e := r.direct.Acquire(ctx, "moved", "c", time.Minute); e != nil {
				err = errors.Join(err, e)
			}
			if err != nil {
				t.Errorf("the other clients: %v", err)
			}
		})
	if err != nil || g.Fence != fence || g.Holds != 1 {
		t.Errorf("resent transfer = %+v, %v; want success with b's fence %d", g, err, fence)
	}
	if i := r.info(t, "moved"); i.Token != "c" || i.Holds != 1 {
		t.Errorf("after the resent transfer: %+v, want c's holding untouched", i)
	}

	// A first acquisition: the resend must not count a second hold.
	err = drop(func() (err error) { g, err = r.store.Acquire(ctx, "fresh", "a", time.Minute); return err },
		func() bool { return r.info(t, "fresh").Held }, nothing)
	if i := r.info(t, "fresh"); err != nil || g.Holds != 1 || i.Holds != 1 {
		t.Errorf("resent acquire = %+v, %v, lock %+v; want one hold", g, err, i)
	}
}

// TestS5LostReplyWithoutRetriesIsNotADefiniteAnswer is the control: with
// go-redis's retries off the same lost reply ends the call with an error
// that is not a sentinel (outcome unknown: the core reports it as
// unavailable), never ErrNotHeld, while the write did land.
func TestS5LostReplyWithoutRetriesIsNotADefiniteAnswer(t *testing.T) {
	r := newReplayRig(t, -1)
	ctx := testCtx(t)
	if _, err := r.store.Acquire(ctx, "commit", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := r.dropFirstReply(t, func() error { return stepcall.ReleaseWrite(ctx, r.store, "commit", "a", "stock", "9") },
		func() bool { return r.rdb.Get(ctx, "stock").Val() == "9" }, func() {})
	if err == nil || errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Commit with its reply lost and no retries = %v, want an unclassified error", err)
	}
}

// TestS5RetentionCoversTheClientsRetryWindow: a retention shorter than the
// time in which go-redis may still resend a call would let a late resend
// miss its record and answer "not held" after all; New raises it to the
// window it reads from the client's options. No network call is made.
func TestS5RetentionCoversTheClientsRetryWindow(t *testing.T) {
	for _, tc := range []struct {
		o    *redis.Options
		want time.Duration
	}{
		{&redis.Options{Addr: "127.0.0.1:1"}, 0},                           // go-redis's defaults: computed below
		{&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}, time.Second}, // no resends: as asked
		{&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 2, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetryBackoff: time.Second}, 6 * time.Second},
	} {
		rdb := redis.NewClient(tc.o)
		if o := rdb.Options(); tc.want == 0 {
			tc.want = time.Duration(o.MaxRetries) * (o.ReadTimeout + o.WriteTimeout + o.MaxRetryBackoff)
			t.Logf("go-redis's defaults: %d retries, timeouts %v/%v, backoff up to %v: window %v", o.MaxRetries, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff, tc.want)
		}
		s, err := redisstore.New(rdb, &redisstore.Options{Retention: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Retention(); got != tc.want {
			t.Errorf("MaxRetries %d: retention %v, want %v", tc.o.MaxRetries, got, tc.want)
		}
		_ = s.Close()
		_ = rdb.Close()
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if _, err := redisstore.New(rdb, &redisstore.Options{Retention: -1}); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("negative retention: %v, want ErrInvalid", err)
	}
}
