package inventory

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// newInstances starts n services over one embedded server, each behind its
// own HTTP server, and returns a Load aimed at them.
func newInstances(t *testing.T, n int) (*Load, *redis.Client) {
	t.Helper()
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rdb := redis.NewClient(&redis.Options{Addr: e.Addr(), PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	t.Cleanup(tr.CloseIdleConnections)
	l := &Load{Client: &http.Client{Transport: tr, Timeout: time.Minute}}
	for i := 0; i < n; i++ {
		svc, err := New(Config{Redis: rdb, Name: "test"})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(svc.Handler())
		t.Cleanup(func() { srv.Close(); _ = svc.Close() })
		l.Targets = append(l.Targets, srv.URL)
	}
	return l, rdb
}

func byStrategy(rs []Result) map[string]Result {
	m := map[string]Result{}
	for _, r := range rs {
		m[r.Strategy] = r
	}
	return m
}

// The library's lock keeps the stock exact under contention; the same
// load with no lock (the negative control) loses updates.
func TestContentionDlockExactNolockLoses(t *testing.T) {
	l, _ := newInstances(t, 2)
	// 50 requests keep it quick under -race: every release wakes every
	// waiter, and miniredis runs each acquire script in gopher-lua.
	sc, _ := Scenarios("contention", 50, 2*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := l.Run(ctx, sc, []string{"nolock", "v4", "dlock"})
	if err != nil {
		t.Fatal(err)
	}
	m := byStrategy(rs)
	if d := m["dlock"]; d.Successes != 50 || d.FinalStock != 50 || d.Overlaps != 0 || d.Kind != KindCorrect {
		t.Errorf("dlock: %+v", d)
	}
	if n := m["nolock"]; n.LostUpdates == 0 || n.Overlaps == 0 || n.Kind != KindLostUpdates {
		t.Errorf("nolock must lose updates (negative control): %+v", n)
	}
	if v := m["v4"]; v.LostUpdates != 0 || v.Overlaps != 0 || v.Successes+v.LockFailures != 50 {
		t.Errorf("v4 under contention refuses but never loses: %+v", v)
	}
}

func TestHandlerRejectsBadInput(t *testing.T) {
	l, rdb := newInstances(t, 1)
	ctx := context.Background()
	if err := rdb.Set(ctx, StockKey, 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"/buy/v9", "/buy/v1?work=-1s", "/buy/v1?lease=1ns", "/buy/v1?work=abc", "/reset?stock=-1"} {
		resp, err := l.Client.Post(l.Targets[0]+u, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 && resp.StatusCode != 400 {
			t.Errorf("%s: status %d", u, resp.StatusCode)
		}
	}
	if n, _ := rdb.Get(ctx, StockKey).Int(); n != 7 {
		t.Fatalf("bad requests changed the stock to %d", n)
	}
	if exists, _ := rdb.Exists(ctx, LockKey).Result(); exists != 0 {
		t.Fatal("a bad request left a lock behind")
	}
}

func TestBuyReportsOutOfStockAndCrashIsRefusedWithoutAllowCrash(t *testing.T) {
	l, _ := newInstances(t, 1)
	ctx := context.Background()
	if err := l.post(ctx, l.Targets[0]+"/reset?stock=1", nil); err != nil {
		t.Fatal(err)
	}
	var a Answer
	// crash=1 on an instance without AllowCrash is an ordinary request.
	if err := l.post(ctx, buyURL(l.Targets[0], "v1", Params{Crash: true}), &a); err != nil || a.Outcome != Sold || a.Left != 0 {
		t.Fatalf("first: %+v %v", a, err)
	}
	a = Answer{}
	if err := l.post(ctx, buyURL(l.Targets[0], "dlock", Params{}), &a); err != nil || a.Outcome != OutOfStock {
		t.Fatalf("second: %+v %v", a, err)
	}
}

// The dlock strategy writes the stock through a fence check: a holder
// whose fence is older than the last writer's changes nothing.
func TestFencedStockWriteRejectsStaleFence(t *testing.T) {
	_, rdb := newInstances(t, 0)
	ctx := context.Background()
	keys := []string{StockKey, fenceKey}
	if n, err := fencedSet.Run(ctx, rdb, keys, 5, 42).Int(); err != nil || n != 1 {
		t.Fatalf("first write: %d %v", n, err)
	}
	if n, err := fencedSet.Run(ctx, rdb, keys, 4, 41).Int(); err != nil || n != 0 {
		t.Fatalf("stale write: %d %v", n, err)
	}
	if v, _ := rdb.Get(ctx, StockKey).Int(); v != 42 {
		t.Fatalf("a stale fence changed the stock to %d", v)
	}
}
