package inventory

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// tryRowLocker is an in-process stand-in for an SQL store's row lock with
// NOWAIT: a mutex tried once. With broken set it runs fn without locking
// (the negative control).
type tryRowLocker struct {
	mu     sync.Mutex
	broken bool
	calls  int
}

func (r *tryRowLocker) WithRowLock(ctx context.Context, key string, fn func(context.Context) error) error {
	if !r.broken {
		if !r.mu.TryLock() {
			return fmt.Errorf("row %s: %w", key, &driver.ContendedError{Remaining: -1})
		}
		defer r.mu.Unlock()
	}
	return fn(ctx)
}

// storeInstances starts n services over one embedded Redis, sharing one
// lock store (a memstore, standing for etcd, ZooKeeper or a database) and
// one row locker.
func storeInstances(t *testing.T, n int, strategy string, store driver.Mutex, rl RowLocker) *Load {
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
		svc, err := New(Config{Redis: rdb, Name: "test", LockStore: store, LockStoreStrategy: strategy, RowLocker: rl})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(svc.Handler())
		t.Cleanup(func() { srv.Close(); _ = svc.Close() })
		l.Targets = append(l.Targets, srv.URL)
	}
	return l
}

// The store strategy sells exactly the stock through any lock store, and
// sql-for-update refuses the requests that find the row locked but never
// loses a sale; the same sql-for-update without its lock (the negative
// control) loses updates.
func TestStoreStrategyWaitsForUpdateRefuses(t *testing.T) {
	rl := &tryRowLocker{}
	l := storeInstances(t, 2, SQLLeaseStrategy, memstore.New(nil), rl)
	sc, _ := Scenarios("contention", 50, 2*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := l.Run(ctx, sc, []string{SQLLeaseStrategy, SQLForUpdateStrategy})
	if err != nil {
		t.Fatal(err)
	}
	m := byStrategy(rs)
	if r := m[SQLLeaseStrategy]; r.Successes != 50 || r.FinalStock != 50 || r.Overlaps != 0 || r.Kind != KindCorrect {
		t.Errorf("sql-lease: %+v", r)
	}
	r := m[SQLForUpdateStrategy]
	if r.LockFailures == 0 || r.Successes+r.LockFailures != 50 || r.LostUpdates != 0 || r.Overlaps != 0 || r.Kind != KindFailed {
		t.Errorf("sql-for-update must refuse some requests and lose none: %+v", r)
	}
	rl.broken = true
	rs, err = l.Run(ctx, sc, []string{SQLForUpdateStrategy})
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[0]; r.LostUpdates == 0 || r.Kind != KindLostUpdates {
		t.Errorf("sql-for-update without its lock must lose updates (negative control): %+v", r)
	}
}

// A store strategy other than the service's, and sql-for-update without a
// row locker, answer an error naming the --store they need; New refuses a
// lock store with a strategy name that is not a store's.
func TestStoreStrategiesNeedTheirStore(t *testing.T) {
	l := storeInstances(t, 1, EtcdStrategy, memstore.New(nil), nil)
	ctx := context.Background()
	if err := l.post(ctx, l.Targets[0]+"/reset", nil); err != nil {
		t.Fatal(err)
	}
	for strategy, want := range map[string]string{ZooKeeperStrategy: "zk://", SQLLeaseStrategy: "postgres://", SQLForUpdateStrategy: "mysql://"} {
		var a Answer
		if err := l.post(ctx, buyURL(l.Targets[0], strategy, Params{}), &a); err != nil || a.Outcome != Failed || !strings.Contains(a.Message, want) {
			t.Errorf("%s without its store: %+v %v", strategy, a, err)
		}
	}
	var a Answer
	if err := l.post(ctx, buyURL(l.Targets[0], EtcdStrategy, Params{}), &a); err != nil || a.Outcome != Sold {
		t.Errorf("etcd strategy over its store: %+v %v", a, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	for _, name := range []string{"", "dlock", SQLForUpdateStrategy, "postgres"} {
		_, err := New(Config{Redis: rdb, LockStore: memstore.New(nil), LockStoreStrategy: name})
		if !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("New with LockStoreStrategy %q: %v, want ErrInvalid", name, err)
		}
	}
}

func TestStoreStrategyNames(t *testing.T) {
	for scheme, want := range map[string]string{"etcd": "etcd", "ZK": "zookeeper", "postgres": "sql-lease",
		"postgresql": "sql-lease", "mysql": "sql-lease", "redis": "", "redlock": "", "": ""} {
		if got := StoreStrategy(scheme); got != want {
			t.Errorf("StoreStrategy(%q) = %q, want %q", scheme, got, want)
		}
	}
	if !IsSQLScheme("mysql") || IsSQLScheme("etcd") || IsSQLScheme("zk") {
		t.Error("IsSQLScheme")
	}
	if NeedsStore("dlock") != "" || NeedsStore(SQLForUpdateStrategy) == "" {
		t.Error("NeedsStore")
	}
}
