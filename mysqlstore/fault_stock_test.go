package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
	"github.com/go-sql-driver/mysql"
)

// The seed's stock scenario (internal/faulttest runs and judges it) across
// 2 processes (this one and a child), each with stockSize.Workers buyers of
// stockSize.Rounds requests, through a fault proxy (see stockWork) that resets
// every connection, or holds the replies for 20-200 ms, at seeded random
// times 20-120 ms apart (at most stockFaults.Max). A buyer locks, reads the
// stock, and if some is left writes stock-1 and records the sale.
// Invariant: no oversell and no lost update: sales = initial - final,
// final >= 0. In the lease and session modes (a dlock Client on Store or
// Session) the resource is fenced: the buyer first claims the row with its
// lease's fence (UPDATE ... WHERE fence < ?), and its write needs the fence
// still there, so a buyer whose lock was lost cannot write after a newer
// holder claimed. In the row-lock mode the read, the write and the sale are
// in WithRowLock's transaction. Negative control: the same buyers without
// a lock lose updates.
var (
	stockSize   = faulttest.Stock{Workers: 4, Rounds: 10, Initial: 60}
	stockFaults = faulttest.FaultPlan{Max: 12, Gap: 20 * time.Millisecond, GapSpread: 100 * time.Millisecond,
		Hold: 20 * time.Millisecond, HoldSpread: 180 * time.Millisecond}
)

func TestFaultStockScenario(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	for _, q := range []string{
		"CREATE TABLE " + opts.Table + "_stock (k VARCHAR(100) PRIMARY KEY, n INT NOT NULL, fence BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB",
		"CREATE TABLE " + opts.Table + "_sales (id BIGINT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(100) NOT NULL, buyer VARCHAR(100) NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	seed := faulttest.Seed(t, "MYSQLSTORE_FAULT_SEED")
	for i, mode := range []string{"lease", "session", "rowlock", "nolock"} {
		t.Run(mode, func(t *testing.T) {
			stockRun(t, db, opts.Table, mode, seed+uint64(i), mode != "nolock")
		})
	}
}

func stockRun(t *testing.T, db *sql.DB, table, mode string, seed uint64, wantSafe bool) {
	key := mode
	if _, err := db.Exec("INSERT INTO "+table+"_stock (k, n) VALUES (?, ?)", key, stockSize.Initial); err != nil {
		t.Fatal(err)
	}
	p := proxy(t, shared(t).Addr())
	dsn := mysqlserver.DSNFor(p.Addr(), mysqlserver.Database, "interpolateParams=true")
	dataDSN := shared(t).DSN("interpolateParams=true")
	c := roles.Start(t, t.Context(), "stock", "MYSQLSTORE_CHILD_DSN="+dsn, "MYSQLSTORE_CHILD_DATA_DSN="+dataDSN, "MYSQLSTORE_CHILD_TABLE="+table,
		"MYSQLSTORE_CHILD_MODE="+mode, "MYSQLSTORE_CHILD_KEY="+key)
	faulttest.StockRun{Mode: mode, Seed: seed, WantSafe: wantSafe, Stock: stockSize, Faults: stockFaults, Proxy: p, Child: c,
		Work: func(res *faulttest.StockResult) error {
			return stockWork(dsn, dataDSN, table, mode, key, "parent", res)
		},
		Count: func() (final, sold int, err error) {
			err = db.QueryRow("SELECT n, (SELECT COUNT(*) FROM "+table+"_sales WHERE k = ?) FROM "+table+"_stock WHERE k = ?", key, key).Scan(&final, &sold)
			return final, sold, err
		},
	}.Run(t)
}

var _ = roles.Register("stock", func() error {
	_ = mysql.SetLogger(&mysql.NopLogger{}) // the faults make the driver log every reset
	return faulttest.StockChild(func(res *faulttest.StockResult) error {
		return stockWork(os.Getenv("MYSQLSTORE_CHILD_DSN"), os.Getenv("MYSQLSTORE_CHILD_DATA_DSN"), os.Getenv("MYSQLSTORE_CHILD_TABLE"), os.Getenv("MYSQLSTORE_CHILD_MODE"), os.Getenv("MYSQLSTORE_CHILD_KEY"), "child", res)
	})
})

// stockWork runs the buyers of one process: everything through dsn (the
// proxy), except that in the lease and session modes only the lock's
// statements do and the stock's go to dataDSN (the server), so that a
// holder whose lock connection was cut goes on working: the case fences
// are for. Failed requests (the faults make some) are counted, not fatal;
// a request never waits more than 20 s and the whole run more than 3
// minutes.
func stockWork(dsn, dataDSN, table, mode, key, who string, res *faulttest.StockResult) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := childDB(dsn, 16)
	if err != nil {
		return err
	}
	defer db.Close()
	data, err := childDB(dataDSN, 16)
	if err != nil {
		return err
	}
	defer data.Close()
	buy, closeFn, err := buyer(db, data, table, mode, key)
	if err != nil {
		return err
	}
	defer closeFn()
	return stockSize.Buy(ctx, who, buy, res)
}

// buyer returns the buy function of mode and what closes it; data is the
// pool of the lease and session modes' stock statements.
func buyer(db, data *sql.DB, table, mode, key string) (faulttest.BuyFunc, func(), error) {
	stock, sales := table+"_stock", table+"_sales"
	read := "SELECT n FROM " + stock + " WHERE k = ?"
	switch mode {
	case "rowlock":
		return rowBuyer(db, table, key), func() {}, nil
	case "nolock":
		return func(ctx context.Context, b string) (bool, error) {
			var n int
			if err := db.QueryRowContext(ctx, read, key).Scan(&n); err != nil || n <= 0 {
				return false, err
			}
			time.Sleep(time.Millisecond) // the seed's think time between read and write
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return false, err
			}
			_, err1 := tx.ExecContext(ctx, "UPDATE "+stock+" SET n = ? WHERE k = ?", n-1, key)
			_, err2 := tx.ExecContext(ctx, "INSERT INTO "+sales+" (k, buyer) VALUES (?, ?)", key, b)
			if err := errors.Join(err1, err2); err != nil {
				_ = tx.Rollback()
				return false, err
			}
			return true, tx.Commit()
		}, func() {}, nil
	}
	return lockBuyer(db, data, table, mode, key)
}

// rowBuyer buys in WithRowLock. An application retries a transaction that
// failed (the faults fail every transaction in flight); bounded: 5
// attempts.
func rowBuyer(db *sql.DB, table, key string) faulttest.BuyFunc {
	opts := mysqlstore.RowLockOptions{Table: table, IdleTimeout: 2 * time.Second}
	return faulttest.Retry(5, func(ctx context.Context, b string) (sold bool, err error) {
		err = mysqlstore.WithRowLock(ctx, db, key, opts, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT n FROM "+table+"_stock WHERE k = ?", key).Scan(&n); err != nil || n <= 0 {
				return err
			}
			sold = true
			if _, err := tx.ExecContext(ctx, "UPDATE "+table+"_stock SET n = ? WHERE k = ?", n-1, key); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO "+table+"_sales (k, buyer) VALUES (?, ?)", key, b)
			return err
		})
		return sold && err == nil, err
	})
}

// lockBuyer buys under a dlock Client on the lease or session store, with
// the resource fenced: the buyer claims the row with the lease's fence (a
// holder with an older one can no longer write), and its write needs it.
func lockBuyer(lockDB, db *sql.DB, table, mode, key string) (faulttest.BuyFunc, func(), error) {
	var store driver.Mutex
	var err error
	if mode == "session" {
		store, err = mysqlstore.NewSession(lockDB, mysqlstore.SessionOptions{Table: table, CheckEvery: 2 * time.Second})
	} else {
		store, err = mysqlstore.New(lockDB, mysqlstore.Options{Table: table})
	}
	if err != nil {
		return nil, nil, err
	}
	var closeStore func(context.Context)
	if s, ok := store.(*mysqlstore.Session); ok {
		closeStore = func(context.Context) { _ = s.Close() }
	}
	stock, sales := table+"_stock", table+"_sales"
	return faulttest.LockBuyer(store, closeStore, key, func(ctx context.Context, l *dlock.Lease, b string) (bool, error) {
		f := l.Fence()
		claimed, err := execN(ctx, db, "UPDATE "+stock+" SET fence = ? WHERE k = ? AND fence < ?", f, key, f)
		if err != nil {
			return false, err
		}
		if claimed == 0 {
			return false, faulttest.ErrStale
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT n FROM "+stock+" WHERE k = ?", key).Scan(&n); err != nil || n <= 0 {
			return false, err
		}
		time.Sleep(time.Millisecond) // the seed's think time between read and write
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return false, err
		}
		wrote, err := execN(ctx, tx, "UPDATE "+stock+" SET n = ? WHERE k = ? AND fence = ?", n-1, key, f)
		if err == nil && wrote == 0 {
			err = faulttest.ErrStale
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, "INSERT INTO "+sales+" (k, buyer) VALUES (?, ?)", key, b)
		}
		if err != nil {
			_ = tx.Rollback()
			return false, err
		}
		return true, tx.Commit()
	})
}
