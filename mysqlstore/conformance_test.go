package mysqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
)

// TestConformanceLease runs the drivertest suite on the lease table, every
// client with a pool of its own (as another process would have), the race
// case with 2 clients × 50 goroutines on one key. Deadlocks are counted
// across every client and must be zero.
func TestConformanceLease(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{Retention: 200 * time.Millisecond})
	admin := openDB(t, shared(t).DSN())
	p := proxy(t, shared(t).Addr())
	var stores []*mysqlstore.Store
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Store {
			s, err := mysqlstore.New(openDB(t, mysqlserver.DSNFor(p.Addr(), mysqlserver.Database, "interpolateParams=true")), opts)
			if err != nil {
				t.Fatal(err)
			}
			stores = append(stores, s)
			return reporting{s, admin, opts}
		},
		Pause: func(t *testing.T) func() {
			up, down := p.Hold(faultproxy.Upstream), p.Hold(faultproxy.Downstream)
			return func() { up(); down() }
		},
		Foreign: func(t *testing.T, key string) {
			// A row a user wrote by hand, with no holds: not a lock.
			if _, err := admin.Exec("INSERT INTO "+opts.Table+"_locks (name, owner, holds, fence, expires_at) VALUES (?, ?, 0, 0, '2999-01-01')", []byte(key), make([]byte, 32)); err != nil {
				t.Fatal(err)
			}
		},
		Clients:    2,
		Goroutines: 50,
		Rounds:     2,
		Slack:      time.Second,
	})
	var n int64
	for _, s := range stores {
		n += s.Deadlocks()
	}
	if n != 0 {
		t.Errorf("%d deadlocks (retried) across the suite; want 0", n)
	}
}

// reporting counts a key's rows (lease table, permits and their anchors,
// idempotency records of the key in any scope, rates, and read-write lock
// holdings and their anchors)
// for drivertest.StateReporter. The sweep is
// client-driven (Acquire and Release run it when due): KeyState sweeps
// first, standing for a table that some client keeps using.
type reporting struct {
	*mysqlstore.Store
	admin *sql.DB
	opts  mysqlstore.Options
}

func (r reporting) Retention() time.Duration { return r.opts.Retention }

func (r reporting) KeyState(ctx context.Context, key string) (int, error) {
	if _, err := r.Sweep(ctx); err != nil {
		return 0, err
	}
	var n int
	t := r.opts.Table
	err := r.admin.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM "+t+"_locks WHERE name = ?) + (SELECT COUNT(*) FROM "+t+
		"_permits WHERE name = ?) + (SELECT COUNT(*) FROM "+t+"_semaphores WHERE name = ?) + (SELECT COUNT(*) FROM "+t+"_idempotency WHERE name = ?) + (SELECT COUNT(*) FROM "+t+
		"_rates WHERE name = ?) + (SELECT COUNT(*) FROM "+t+"_rwholds WHERE name = ?) + (SELECT COUNT(*) FROM "+t+"_rwkeys WHERE name = ?)",
		[]byte(key), []byte(key), []byte(key), []byte(key), []byte(key), []byte(key), []byte(key)).Scan(&n)
	return n, err
}

// TestConformanceSession runs the suite on the session lock (GET_LOCK on
// pinned connections), each client with a pool of its own. Kill ends a
// client's connections on the server (KILL CONNECTION), as a crashed
// process's would end. The suite renews sessions with the store's
// KeepAlive (driver.SessionKeeper), which pings each holding connection.
func TestConformanceSession(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	admin := openDB(t, shared(t).DSN())
	p := proxy(t, shared(t).Addr())
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Store {
			s, err := mysqlstore.NewSession(openDB(t, mysqlserver.DSNFor(p.Addr(), mysqlserver.Database)),
				mysqlstore.SessionOptions{Table: opts.Table, MaxConns: 40})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Kill: func(t *testing.T, m driver.Store) {
			for _, id := range m.(*mysqlstore.Session).ConnIDs() {
				if _, err := admin.Exec("KILL CONNECTION ?", id); err != nil {
					t.Fatal(err)
				}
			}
		},
		Pause: func(t *testing.T) func() {
			up, down := p.Hold(faultproxy.Upstream), p.Hold(faultproxy.Downstream)
			return func() { up(); down() }
		},
		Skip: map[string]string{
			"CancelledContextChangesNothing": "GET_LOCK belongs to the connection, not the token: a client " +
				"cannot release a lock another client took with the same token (the case's last step)",
			"KilledSessionFreesItsKeys": "a killed connection frees its locks at once (the server sees it end); " +
				"the case expects them kept until the session TTL. TestSessionKilledConnectionIsLost checks the loss",
		},
		Clients:    2,
		Goroutines: 20,
		Rounds:     2,
		Slack:      time.Second,
	})
}
