// Package inventory is the source articles' stock service and its load
// generator: an HTTP service that sells ProductStock_10000 (100 items) with
// one endpoint per lock strategy of the articles, run as several
// instances against one Redis, and a generator that fires concurrent
// requests at them and tells which strategies lose updates.
//
// Strategies v1 to v5 are faithful to the articles, holes included: they are
// the negative controls that show what this library fixes. Do not copy them.
package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// Keys of the demo, as in the articles.
const (
	StockKey     = "ProductStock_10000"
	LockKey      = "DistributedLock_10000" // v1 to v5, and the dlock strategy's lock name
	RedlockKey   = "redlock:10000"
	occupancyKey = "ProductStock_10000:inside" // instrumentation: requests inside the critical section
	fenceKey     = "ProductStock_10000:fence"  // last fence that wrote the stock (dlock strategy)
	InitialStock = 100
)

// ArticleLease is the lease the articles give v2 to v5 and RedLock.net.
const ArticleLease = 30 * time.Second

// Strategies lists every endpoint, in the order the articles try them.
var Strategies = []string{"nolock", "local", "v1", "v2", "v3", "v4", "v5", "redlock", "dlock", "dlock-commit"}

// Outcomes of one request.
const (
	Sold       = "sold"
	OutOfStock = "out_of_stock"
	LockFailed = "lock_failed"
	Failed     = "error"
)

// Answer is the JSON body of a /buy reply.
type Answer struct {
	Outcome  string `json:"outcome"`
	Left     int64  `json:"left"`               // stock after this sale
	Message  string `json:"message,omitempty"`  // "could not get lock", "out of stock", or the error
	Instance string `json:"instance,omitempty"` // which instance answered
	// Overlap is set when another request was inside the critical section
	// at the same time: the lock did not exclude it.
	Overlap bool `json:"overlap,omitempty"`
	// ReleasedOther is set when this request's release deleted a lock that
	// another request held (v2, v3).
	ReleasedOther bool `json:"released_other,omitempty"`
	// LeaseLost is set when, at release, the lock was no longer this
	// request's: its lease ran out while it still held the lock.
	LeaseLost bool `json:"lease_lost,omitempty"`
}

// Params shape one request; the load generator sets them per scenario.
type Params struct {
	Work  time.Duration // pause between reading and writing the stock
	Lease time.Duration // lease of v2 to v5, redlock and dlock; 0: the articles' 30 s (dlock: its default)
	// Stall is a pause after the write while still holding the lock, before
	// releasing it; for v3 it falls between its check and its delete, the
	// window that makes v3's release non-atomic.
	Stall time.Duration
	Crash bool // SIGKILL the instance right after acquiring (needs Config.AllowCrash)
}

// Config configures a Service.
type Config struct {
	Redis        redis.UniversalClient   // stock and v1 to v5 locks; also the dlock store
	RedlockNodes []redis.UniversalClient // independent primaries for redlock; default: Redis only
	Prefix       string                  // key prefix of the dlock strategy's lock; default redisstore's
	Name         string                  // instance name put in answers
	AllowCrash   bool                    // honour crash=1 (the demo's crash scenario)
	// LockStore is the lock store of the store strategy named
	// LockStoreStrategy (etcd, zookeeper or sql-lease: see StoreStrategy),
	// any driver.Mutex; nil: the store strategies answer an error. The
	// stock stays in Redis, written with the lock's fence by the same
	// fenced write as the dlock strategy.
	LockStore         driver.Mutex
	LockStoreStrategy string
	// RowLocker runs the sql-for-update strategy; nil: that strategy
	// answers an error.
	RowLocker RowLocker
}

// Service is one instance of the stock service. It owns none of the clients.
type Service struct {
	cfg   Config
	store *redisstore.Store
	locks *dlock.Client
	// lockStore is the store strategy's Client; nil without
	// Config.LockStore.
	lockStore *dlock.Client
	local     sync.Mutex // the "local" strategy's in-process lock
	rl        *redlock
}

// New returns a service over cfg. It fails with dlock.ErrInvalid if
// cfg.Redis is nil, or cfg.LockStore is set and cfg.LockStoreStrategy is
// not a lock store strategy. It makes no network call.
func New(cfg Config) (*Service, error) {
	if cfg.Redis == nil {
		return nil, fmt.Errorf("%w: inventory: nil redis client", dlock.ErrInvalid)
	}
	store, err := redisstore.New(cfg.Redis, &redisstore.Options{Prefix: cfg.Prefix})
	if err != nil {
		return nil, err
	}
	locks, err := dlock.New(store)
	if err != nil {
		return nil, err
	}
	nodes := cfg.RedlockNodes
	if len(nodes) == 0 {
		nodes = []redis.UniversalClient{cfg.Redis}
	}
	svc := &Service{cfg: cfg, store: store, locks: locks, rl: &redlock{nodes: nodes}}
	if cfg.LockStore != nil {
		if !isLockStoreStrategy(cfg.LockStoreStrategy) {
			return nil, fmt.Errorf("%w: inventory: lock store strategy %q (want %s, %s or %s)", dlock.ErrInvalid,
				cfg.LockStoreStrategy, EtcdStrategy, ZooKeeperStrategy, SQLLeaseStrategy)
		}
		if svc.lockStore, err = dlock.New(cfg.LockStore); err != nil {
			return nil, err
		}
	}
	return svc, nil
}

// Close ends the dlock store's subscription. It does not close the clients.
func (s *Service) Close() error { return s.store.Close() }

// Handler serves:
//
//	POST /buy/{strategy}?work=D&lease=D&stall=D&crash=1   one sale, JSON Answer
//	POST /reset?stock=N    set the stock (default 100) and delete every lock
//	GET  /stock            {"stock": N}
//	GET  /healthz          200 when Redis answers
//
// /buy answers 200 sold, 410 out of stock, 423 could not get lock, 500
// error; 404 for an unknown strategy, 400 for bad parameters.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /buy/{strategy}", s.serveBuy)
	mux.HandleFunc("POST /reset", s.serveReset)
	mux.HandleFunc("GET /stock", s.serveStock)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Redis.Ping(r.Context()).Err(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

func (s *Service) serveBuy(w http.ResponseWriter, r *http.Request) {
	fn := s.strategy(r.PathValue("strategy"))
	if fn == nil {
		http.Error(w, "unknown strategy; one of "+fmt.Sprint(Strategies), http.StatusNotFound)
		return
	}
	p, err := parseParams(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a := fn(r.Context(), p)
	a.Instance = s.cfg.Name
	status := map[string]int{Sold: 200, OutOfStock: 410, LockFailed: 423}[a.Outcome]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, a)
}

func parseParams(r *http.Request) (Params, error) {
	var p Params
	q := r.URL.Query()
	for name, dst := range map[string]*time.Duration{"work": &p.Work, "lease": &p.Lease, "stall": &p.Stall} {
		if v := q.Get(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > time.Hour {
				return p, fmt.Errorf("%s: want a duration between 0 and 1h, got %q", name, v)
			}
			*dst = d
		}
	}
	if p.Lease != 0 && p.Lease < dlock.MinTTL {
		return p, fmt.Errorf("lease: at least %v", dlock.MinTTL)
	}
	p.Crash = q.Get("crash") == "1"
	return p, nil
}

func (s *Service) serveReset(w http.ResponseWriter, r *http.Request) {
	stock := int64(InitialStock)
	if v := r.URL.Query().Get("stock"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "stock: want a non-negative integer", http.StatusBadRequest)
			return
		}
		stock = n
	}
	if err := s.Reset(r.Context(), stock); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, 200, map[string]int64{"stock": stock})
}

func (s *Service) serveStock(w http.ResponseWriter, r *http.Request) {
	n, err := s.Stock(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, 200, map[string]int64{"stock": n})
}

// Reset sets the stock and deletes every lock of every strategy (this is
// the "someone intervenes" that a v1 deadlock needs), except the store
// strategies' locks in their stores, which their sessions or leases free. The dlock fence
// counter is kept (fences only grow); the stock's last-writer fences are
// cleared with the stock they guarded. On a Redis error some locks may
// already be deleted; the stock is written last.
func (s *Service) Reset(ctx context.Context, stock int64) error {
	lock, _ := s.store.Keys(LockKey)
	keys := []string{LockKey, lock, occupancyKey, fenceKey}
	for _, st := range StoreStrategies() {
		keys = append(keys, storeFenceKey(st))
	}
	if err := s.cfg.Redis.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("inventory: reset: %w", err)
	}
	for _, n := range s.rl.nodes {
		if err := n.Del(ctx, RedlockKey).Err(); err != nil {
			return fmt.Errorf("inventory: reset redlock node: %w", err)
		}
	}
	return s.cfg.Redis.Set(ctx, StockKey, stock, 0).Err()
}

// Stock reads the current stock; a missing key reads as 0. Redis errors
// are returned as they come.
func (s *Service) Stock(ctx context.Context) (int64, error) {
	n, err := s.cfg.Redis.Get(ctx, StockKey).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decrement is the critical section every strategy protects: read the
// stock, work, write stock-1. write replaces the plain SET (the dlock
// strategy fences it). It counts how many requests are inside at once.
func (s *Service) decrement(ctx context.Context, p Params, write func(ctx context.Context, left int64) error) Answer {
	if p.Crash && s.cfg.AllowCrash {
		// A crash inside the critical section: no defer, no release runs.
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
	}
	rdb := s.cfg.Redis
	inside, err := rdb.Incr(ctx, occupancyKey).Result()
	if err != nil {
		return failed(err)
	}
	defer rdb.Decr(context.WithoutCancel(ctx), occupancyKey)
	cur, err := rdb.Get(ctx, StockKey).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return failed(err)
	}
	if cur < 1 {
		return Answer{Outcome: OutOfStock, Left: cur, Message: "out of stock", Overlap: inside > 1}
	}
	if err := sleep(ctx, p.Work); err != nil {
		return failed(err)
	}
	if write == nil {
		write = func(ctx context.Context, left int64) error { return rdb.Set(ctx, StockKey, left, 0).Err() }
	}
	if err := write(ctx, cur-1); err != nil {
		return failed(err)
	}
	return Answer{Outcome: Sold, Left: cur - 1, Overlap: inside > 1}
}

func failed(err error) Answer { return Answer{Outcome: Failed, Message: err.Error()} }

func lockFailed() Answer { return Answer{Outcome: LockFailed, Message: "could not get lock"} }

// sleep pauses for d or until ctx ends; pausing is the service's simulated work.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ping checks that Redis and every Redlock node answer. The error matches
// dlock.ErrUnavailable.
func (s *Service) Ping(ctx context.Context) error {
	for _, c := range append([]redis.UniversalClient{s.cfg.Redis}, s.rl.nodes...) {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("%w: inventory: %w", dlock.ErrUnavailable, err)
		}
	}
	return nil
}
