package chaos_test

import (
	"cmp"
	"context"
	"database/sql"
	"io"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"example.com/dlock/internal/etcdserver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/pgserver"
	"example.com/dlock/internal/zkserver"
	"example.com/dlock/memstore"
	"example.com/dlock/mysqlstore"
	"example.com/dlock/pgstore"
	"example.com/dlock/redisstore"
	"example.com/dlock/zkstore"
)

// The stores the read-write lock and semaphore traffic runs on. A target
// starts its server for one run and makes the workers' clients, each on a
// connection of its own through a fault proxy of its own (memstore, in
// process, has no connection: lossyMem loses its replies instead).

// famTarget is one store under the family traffic.
type famTarget struct {
	name string
	// start starts the store's server for t and returns the maker of
	// clients: a new client of that server on each call, with its proxy
	// (nil when the store has no connection to fault), closed by t.Cleanup.
	start func(t *testing.T) func(t *testing.T) (driver.Store, *faultproxy.Proxy)
	// session: holdings live in a session (etcd lease, ZooKeeper session,
	// database connection), whose TTL replaces the one asked for. The
	// traffic then makes no expiry-only operation (Extend shorter or
	// longer, killed fixed-lease holders), as the conformance suites skip
	// the expiry cases there.
	session bool
	// pace is the run's pace; its zero fields take famDefaultPace's.
	pace famPace
}

// famPace is how a run goes: how long the traffic runs (and its control),
// the longest wait a worker asks for, the shortest time between two faults
// of a proxy (the longest is 6 times that), how rare writes are (one
// read-write lock operation in writeOneIn), and whether the faults only
// hold and slow replies (noCuts: no resets, no dropped replies), and
// whether writers never give up early (patientWriters:
// no TryLock and no cancelled wait of a writer; readers still make both).
type famPace struct {
	runFor, controlFor, waitMax, faultGap time.Duration
	writeOneIn                            int
	noCuts, patientWriters                bool
}

// famDefaultPace is the pace of a store that answers in a round trip or
// two: Redis, memstore and the SQL stores.
var famDefaultPace = famPace{runFor: 2 * time.Second, controlFor: time.Second, waitMax: 800 * time.Millisecond, faultGap: 50 * time.Millisecond, writeOneIn: 3}

// with returns p with its zero fields taken from famDefaultPace.
func (p famPace) with() famPace {
	d := famDefaultPace
	p.runFor, p.controlFor = cmp.Or(p.runFor, d.runFor), cmp.Or(p.controlFor, d.controlFor)
	p.waitMax, p.faultGap = cmp.Or(p.waitMax, d.waitMax), cmp.Or(p.faultGap, d.faultGap)
	p.writeOneIn = cmp.Or(p.writeOneIn, d.writeOneIn)
	return p
}

// rwTargets are the stores whose read-write lock the traffic checks (R37).
// TestRWTrafficListsMariaDBOnceItHasTheLock keeps MariaDB's lease table
// here while *mysqlstore.Store offers the lock (mysqlRWHook).
var rwTargets = []famTarget{
	{name: "redis", start: redisTarget},
	{name: "memstore", start: memTarget},
	{name: "etcd", start: etcdTarget, session: true},
	{name: "zookeeper", start: zkTarget, session: true, pace: zkRWPace},
	{name: "postgres-session", start: pgSessionTarget, session: true, pace: slowPace},
	{name: "postgres-lease", start: pgLeaseTarget},
	{name: "mysql-lease", start: mysqlLease},
}

// semTargets are the stores whose semaphore the traffic checks (R38). The
// session stores of PostgreSQL and MariaDB have none.
var semTargets = []famTarget{
	{name: "redis", start: redisTarget},
	{name: "memstore", start: memTarget},
	{name: "etcd", start: etcdTarget, session: true},
	{name: "zookeeper", start: zkTarget, session: true, pace: zkSemPace},
	{name: "postgres-lease", start: pgLeaseTarget},
	{name: "mysql-lease", start: mysqlLease},
}

// famProxy returns a fault proxy to addr, closed when t ends.
func famProxy(t *testing.T, addr string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// closeWithin calls close with a context of a few seconds.
func closeWithin(close func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = close(ctx)
}

func redisTarget(t *testing.T) func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
	srv, _ := newRedis(t)
	return func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
		p := famProxy(t, srv.Addr())
		rdb := redis.NewClient(clientOptions(p.Addr()))
		t.Cleanup(func() { _ = rdb.Close() })
		s, err := redisstore.New(rdb, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, p
	}
}

// memTarget: every worker shares one in-process store, as goroutines of
// one process would, each through a lossyMem of its own (lost replies).
func memTarget(*testing.T) func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
	s := memstore.New(nil)
	return func(*testing.T) (driver.Store, *faultproxy.Proxy) { return &lossyMem{Store: s}, nil }
}

// etcdTarget: a single node; each client has a 2 s session (etcd keeps
// TTLs in seconds and checks expiry every 500 ms).
func etcdTarget(t *testing.T) func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
	c := etcdserver.Start(t)
	return func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
		p := famProxy(t, c.Members[0].Addr())
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := etcdstore.New(cli, etcdstore.Options{Prefix: "chaos/", SessionTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeWithin(s.Close); _ = cli.Close() })
		return s, p
	}
}

// zkTarget: a standalone server; each client has a 3 s session.
func zkTarget(t *testing.T) func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
	zkserver.Java(t)
	e := zkserver.Start(t)
	return func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
		p := famProxy(t, e.Addrs()[0])
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := zkstore.Dial(ctx, []string{p.Addr()}, zkstore.Options{Root: "/chaos", RWRoot: "/chaos-rw", SemRoot: "/chaos-sem", SessionTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, p
	}
}

// pgTarget starts a server with the default schema and returns the maker
// of clients, each a store open makes on a pool of its own through its
// proxy.
func pgTarget(t *testing.T, open func(pool *pgxpool.Pool) (pgStore, error)) func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
	srv := pgserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := pgstore.Migrate(ctx, admin, pgstore.Options{}); err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
		p := famProxy(t, srv.Addr())
		cfg, err := pgxpool.ParseConfig(srv.URLFor(p.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 8
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := open(pool)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeWithin(s.Close) })
		return s, p
	}
}

// pgStore is a PostgreSQL store: the lease table's or the session's.
type pgStore interface {
	driver.Store
	Close(ctx context.Context) error
}

// pgLeaseTarget: the lease table (its semaphore).
func pgLeaseTarget(t *testing.T) func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
	return pgTarget(t, func(pool *pgxpool.Pool) (pgStore, error) {
		return pgstore.New(pool, pgstore.Options{SweepInterval: 200 * time.Millisecond})
	})
}

// pgSessionTarget: the session lock (its read-write lock on advisory
// locks), with a 2 s check interval.
func pgSessionTarget(t *testing.T) func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
	return pgTarget(t, func(pool *pgxpool.Pool) (pgStore, error) {
		return pgstore.NewSession(pool, pgstore.SessionOptions{CheckInterval: 2 * time.Second})
	})
}

// mysqlLease: MariaDB's lease table (its semaphore; its read-write lock
// joins rwTargets through mysqlRWHook). The clients read with a 1 s
// timeout, as go-redis's 300 ms one for Redis: without one, a statement
// whose reply the proxy dropped waits forever (the ROLLBACK of a failed
// transaction takes no context).
func mysqlLease(t *testing.T) func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
	_ = mysql.SetLogger(log.New(io.Discard, "", 0)) // the driver logs every connection the faults break
	srv := mysqlserver.Start(t)
	opts := mysqlstore.Options{Retention: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := mysqlstore.Migrate(ctx, openSQL(t, srv.DSN()), opts); err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T) (driver.Store, *faultproxy.Proxy) {
		p := famProxy(t, srv.Addr())
		s, err := mysqlstore.New(openSQL(t, mysqlserver.DSNFor(p.Addr(), mysqlserver.Database, "interpolateParams=true", "readTimeout=1s", "writeTimeout=1s")), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, p
	}
}

// openSQL opens a MariaDB pool on dsn, closed when t ends.
func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// slowPace is the read-write lock's pace on PostgreSQL's session store,
// and its waits and fault gaps on ZooKeeper (zkRWPace). ZooKeeper's takes
// several round trips per call, and serves writers in queue order, so that
// a writer that gave up (a TryLock, a bound elapsed, a cancelled wait)
// holds every later writer and reader back for driver.WriterWaitTTL
// (docs/rwlock.md); PostgreSQL's holds each worker's holdings on a pinned
// connection, which every reset ends. Longer waits, a longer run and fewer
// faults, or the traffic hardly moves. On PostgreSQL only held and slow
// replies (noCuts): a reset ends the connection's advisory locks on the
// server at once, before the holder can know (the session lock's
// documented window, docs/stores.md), and this check counts the holder's
// belief, so resets made overlaps of a few milliseconds in 2 of 4 runs on
// 2026-11-29 (seeds 1795969918323732797, 1795970805241365811). The
// session store's reset and kill cases are pgstore's TestFaultSessionReset
// and TestFaultDatabaseKilled, which check the loss signal instead.
var slowPace = famPace{runFor: 4 * time.Second, waitMax: 3 * time.Second, faultGap: 400 * time.Millisecond, noCuts: true}

// zkRWPace and zkSemPace: on ZooKeeper the faults only hold and slow
// replies, and the read-write lock's writers never give up early: a writer
// that did (a TryLock refused, a cancelled wait) left its node ahead of
// every later writer for 2 s, and loaded runs made no write in 8 s, even
// with writers waiting 3 s. A reset or a dropped reply makes go-zookeeper v1.0.4 reconnect,
// and its reconnect races (recvLoop writes lastZxid while sendSetWatches
// reads it: samuel/go-zookeeper#260, go-zookeeper/zk#35, both open), which
// -race reports.
var (
	zkRWPace  = famPace{waitMax: slowPace.waitMax, faultGap: slowPace.faultGap, noCuts: true, patientWriters: true}
	zkSemPace = famPace{noCuts: true}
)

// TestRWTrafficListsMariaDBOnceItHasTheLock: MariaDB's lease table is in
// rwTargets exactly when *mysqlstore.Store offers the read-write lock
// (mysqlRWHook), so that its lock does not land without its traffic.
func TestRWTrafficListsMariaDBOnceItHasTheLock(t *testing.T) {
	_, offers := any((*mysqlstore.Store)(nil)).(driver.RWMutex)
	listed := slices.ContainsFunc(rwTargets, func(tg famTarget) bool { return tg.name == "mysql-lease" })
	if offers != listed {
		t.Fatalf("*mysqlstore.Store offers driver.RWMutex: %v; mysql-lease in rwTargets: %v. See mysqlRWHook", offers, listed)
	}
}
