package pgstore_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The seed's stock scenario (internal/faulttest runs and judges it) across
// 2 processes (this one and a child), each with stockSize.Workers buyers of
// stockSize.Rounds requests, through a fault proxy that resets every
// connection, or holds the replies for 50-350 ms, at seeded random times
// 50-300 ms apart (at most stockFaults.Max). A buyer locks, reads the stock,
// and if some is left writes stock-1 and records the sale. Invariant: no
// oversell and no lost update: sales = initial - final, final >= 0. In the
// lease and session modes the resource is fenced (the read claims the
// lease's fence, the write needs it: a buyer whose lease was lost cannot
// write after a newer holder read); in the row-lock mode the read, the
// write and the sale are in the locking transaction. Negative control:
// the same buyers without a lock lose updates.
var (
	stockSize   = faulttest.Stock{Workers: 4, Rounds: 8, Initial: 40}
	stockFaults = faulttest.FaultPlan{Max: 12, Gap: 50 * time.Millisecond, GapSpread: 250 * time.Millisecond,
		Hold: 50 * time.Millisecond, HoldSpread: 300 * time.Millisecond}
)

func TestFaultStockScenario(t *testing.T) {
	srv := sessServer(t)
	admin := sessPool(t, srv.URL(), 4)
	if _, err := admin.Exec(tctx(t), `CREATE TABLE IF NOT EXISTS stock (k text PRIMARY KEY, n int NOT NULL, fence bigint NOT NULL DEFAULT 0);
		CREATE TABLE IF NOT EXISTS sales (id bigserial PRIMARY KEY, k text NOT NULL, buyer text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	seed := faulttest.Seed(t, "PGSTORE_FAULT_SEED")
	for i, mode := range []string{"lease", "session", "rowlock", "nolock"} {
		t.Run(mode, func(t *testing.T) {
			stockRun(t, srv.Addr(), srv.URLFor, admin, mode, seed+uint64(i), mode != "nolock")
		})
	}
}

func stockRun(t *testing.T, addr string, urlFor func(string) string, admin *pgxpool.Pool, mode string, seed uint64, wantSafe bool) {
	key := t.Name()
	if _, err := admin.Exec(tctx(t), `DELETE FROM sales WHERE k = $1`, key); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(tctx(t), `INSERT INTO stock (k, n) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET n = $2, fence = 0`, key, stockSize.Initial); err != nil {
		t.Fatal(err)
	}
	p := proxied(t, addr)
	url := urlFor(p.Addr())
	c := roles.Start(t, t.Context(), "stock", "PGSTORE_CHILD_URL="+url, "PGSTORE_CHILD_MODE="+mode, "PGSTORE_CHILD_KEY="+key)
	faulttest.StockRun{Mode: mode, Seed: seed, WantSafe: wantSafe, Stock: stockSize, Faults: stockFaults, Proxy: p, Child: c,
		Work: func(res *faulttest.StockResult) error { return stockWork(url, mode, key, "parent", res) },
		Count: func() (final, sold int, err error) {
			err = admin.QueryRow(tctx(t), `SELECT n, (SELECT count(*) FROM sales WHERE k = $1) FROM stock WHERE k = $1`, key).Scan(&final, &sold)
			return final, sold, err
		},
	}.Run(t)
}

var _ = roles.Register("stock", func() error {
	return faulttest.StockChild(func(res *faulttest.StockResult) error {
		return stockWork(os.Getenv("PGSTORE_CHILD_URL"), os.Getenv("PGSTORE_CHILD_MODE"), os.Getenv("PGSTORE_CHILD_KEY"), "child", res)
	})
})

// stockWork runs the buyers of one process. Failed requests (the faults
// make some) are counted, not fatal; a request never waits more than 20 s
// and the whole run more than 3 minutes.
func stockWork(url, mode, key, who string, res *faulttest.StockResult) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url+"&pool_max_conns=10")
	if err != nil {
		return err
	}
	defer pool.Close()
	buy, closeFn, err := buyer(ctx, pool, mode, key)
	if err != nil {
		return err
	}
	defer closeFn()
	return stockSize.Buy(ctx, who, buy, res)
}

// sale writes stock n-1 and records the sale, in q.
func sale(ctx context.Context, q pgx.Tx, key string, n int, buyer string) error {
	if _, err := q.Exec(ctx, `UPDATE stock SET n = $2 WHERE k = $1`, key, n-1); err != nil {
		return err
	}
	_, err := q.Exec(ctx, `INSERT INTO sales (k, buyer) VALUES ($1, $2)`, key, buyer)
	return err
}

// buyer returns the buy function of mode and what closes it.
func buyer(ctx context.Context, pool *pgxpool.Pool, mode, key string) (faulttest.BuyFunc, func(), error) {
	switch mode {
	case "rowlock":
		return rowBuyer(pool, key), func() {}, nil
	case "nolock": // retried as the row-lock mode is (the faults fail every request in flight)
		return faulttest.Retry(5, func(ctx context.Context, b string) (bool, error) {
			var n int
			if err := pool.QueryRow(ctx, `SELECT n FROM stock WHERE k = $1`, key).Scan(&n); err != nil || n <= 0 {
				return false, err
			}
			time.Sleep(time.Millisecond) // the seed's think time between read and write
			return true, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return sale(ctx, tx, key, n, b) })
		}), func() {}, nil
	}
	return lockBuyer(pool, mode, key)
}

// rowBuyer buys in WithRowLock. An application retries a transaction that
// failed (the faults fail every transaction in flight); bounded: 5
// attempts.
func rowBuyer(pool *pgxpool.Pool, key string) faulttest.BuyFunc {
	return faulttest.Retry(5, func(ctx context.Context, b string) (sold bool, err error) {
		err = pgstore.WithRowLock(ctx, pool, key, pgstore.RowLockOptions{IdleTimeout: 2 * time.Second}, func(tx pgx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx, `SELECT n FROM stock WHERE k = $1`, key).Scan(&n); err != nil || n <= 0 {
				return err
			}
			sold = true
			return sale(ctx, tx, key, n, b)
		})
		return sold && err == nil, err
	})
}

// lockBuyer buys under a dlock Client on the lease or session store, with
// the resource fenced: the read claims the lease's fence (a holder with an
// older one can no longer write), the write needs it.
func lockBuyer(pool *pgxpool.Pool, mode, key string) (faulttest.BuyFunc, func(), error) {
	var store driver.Mutex
	var err error
	if mode == "session" {
		store, err = pgstore.NewSession(pool, pgstore.SessionOptions{CheckInterval: 2 * time.Second})
	} else {
		store, err = pgstore.New(pool, pgstore.Options{SweepInterval: -1})
	}
	if err != nil {
		return nil, nil, err
	}
	var closeStore func(context.Context)
	if cl, ok := store.(interface{ Close(context.Context) error }); ok {
		closeStore = func(ctx context.Context) { _ = cl.Close(ctx) }
	}
	return faulttest.LockBuyer(store, closeStore, key, func(ctx context.Context, l *dlock.Lease, b string) (bool, error) {
		f := int64(l.Fence())
		var n int
		err = pool.QueryRow(ctx, `UPDATE stock SET fence = $2 WHERE k = $1 AND fence <= $2 RETURNING n`, key, f).Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, faulttest.ErrStale
		}
		if err != nil || n <= 0 {
			return false, err
		}
		time.Sleep(time.Millisecond) // the seed's think time between read and write
		sold := false
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE stock SET n = $3 WHERE k = $1 AND fence = $2`, key, f, n-1)
			if err != nil || tag.RowsAffected() == 0 {
				return errors.Join(err, faulttest.ErrStale)
			}
			sold = true
			_, err = tx.Exec(ctx, `INSERT INTO sales (k, buyer) VALUES ($1, $2)`, key, b)
			return err
		})
		return sold && err == nil, err
	})
}
