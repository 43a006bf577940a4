package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// The drivertest conformance suite: every client a Store on its own pool
// (as another process would have) over one migrated table. Pause freezes
// the whole server (SIGSTOP of its process group): connections stay open,
// nothing answers, and the state is intact after SIGCONT. Kill closes the
// client's pool and its store without releasing anything, as a crashed
// process would: its leases end with their TTL.
func TestConformance(t *testing.T) { conformance(t, false) }

// TestConformanceDB is the suite on stores made by NewDB on *sql.DBs of
// pgx's stdlib driver (database/sql users).
func TestConformanceDB(t *testing.T) { conformance(t, true) }

func conformance(t *testing.T, viaSQL bool) {
	srv := server(t)
	admin := newPool(t)
	table := uniqTable(t, admin)
	var mu sync.Mutex
	pools := map[driver.Mutex]*pgxpool.Pool{}
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Mutex {
			pool, err := pgxpool.New(context.Background(), srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			opts := pgstore.Options{Table: table, SweepInterval: 200 * time.Millisecond}
			s, err := pgstore.New(pool, opts)
			if viaSQL {
				db := stdlib.OpenDBFromPool(pool)
				t.Cleanup(func() { db.Close() })
				s, err = pgstore.NewDB(db, opts)
			}
			if err != nil {
				t.Fatal(err)
			}
			r := reporting{s, admin, table}
			mu.Lock()
			pools[r] = pool
			mu.Unlock()
			t.Cleanup(func() {
				c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = s.Close(c)
				pool.Close()
			})
			return r
		},
		Pause: func(t *testing.T) func() {
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := srv.Resume(); err != nil {
					t.Error(err)
				}
			}
		},
		Kill: func(t *testing.T, s driver.Mutex) {
			mu.Lock()
			pool := pools[s]
			mu.Unlock()
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.(reporting).Close(c) // stops the listener and sweep; releases nothing
			pool.Close()
		},
		Slack: time.Second,
	})
}

// reporting lets the suite count what the store keeps for a key: rows of
// the lease table with that name, live or expired.
type reporting struct {
	*pgstore.Store
	admin *pgxpool.Pool
	table string
}

func (r reporting) KeyState(ctx context.Context, key string) (int, error) {
	var n int
	err := r.admin.QueryRow(ctx, "SELECT count(*) FROM "+r.table+"_locks WHERE name = $1", key).Scan(&n)
	return n, err
}
