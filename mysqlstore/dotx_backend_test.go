package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/sqltest"
	"example.com/dlock/mysqlstore"
	"example.com/dlock/mysqlstore/myguard"
)

// myBackend is the package's server as the SQL test kit sees it.
type myBackend struct{}

func (myBackend) Table(t testing.TB) string {
	t.Helper()
	admin, opts := migrated(t, mysqlstore.Options{})
	if _, err := admin.ExecContext(ctxT(t), "CREATE TABLE "+opts.Table+"_charges (k VARCHAR(64) NOT NULL, fence BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	return opts.Table
}

func (myBackend) Guard(t testing.TB, table string, broken sqltest.Broken, opts ...dlock.Option) sqltest.Guard {
	t.Helper()
	g, err := openMyGuard(openDB(t, shared(t).DSN()), mysqlstore.Options{Table: table}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	switch broken {
	case sqltest.NoFenceCheck:
		mysqlstore.WithoutFenceCheck(g.s)
	case sqltest.WaitingBegin:
		mysqlstore.WithWaitingFoldedBegin(g.s)
	}
	return g
}

// Idle: the session's idle_transaction_timeout, set in the DSN (whole
// seconds), as mysql.md says to bound a paused executor.
func (myBackend) Idle(t testing.TB, table string, bound time.Duration, opts ...dlock.Option) sqltest.Guard {
	t.Helper()
	secs := int((bound + time.Second - 1) / time.Second)
	g, err := openMyGuard(openDB(t, shared(t).DSN(fmt.Sprintf("idle_transaction_timeout=%d", secs))), mysqlstore.Options{Table: table}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (myBackend) Counted(t testing.TB, table string) (sqltest.Guard, sqltest.Counter) {
	t.Helper()
	db := openDB(t, shared(t).DSN("interpolateParams=true"))
	db.SetMaxOpenConns(1) // the session's status counts all
	g, err := openMyGuard(db, mysqlstore.Options{Table: table, SweepEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return g, myCounter{db}
}

func (myBackend) StartExecutor(t testing.TB, c context.Context, env ...string) *faulttest.Child {
	return roles.Start(t, c, "dotx-executor", append(env, "MYSQLSTORE_CHILD_DSN="+shared(t).DSN())...)
}

var _ = roles.Register("dotx-executor", func() error {
	return sqltest.RunExecutor(func(table string, opts ...dlock.Option) (sqltest.Guard, error) {
		db, err := childDB(os.Getenv("MYSQLSTORE_CHILD_DSN"), 8)
		if err != nil {
			return nil, err
		}
		return openMyGuard(db, mysqlstore.Options{Table: table}, opts...)
	})
})

// myGuard is a store on a pool and a Guard on it.
type myGuard struct {
	db    *sql.DB
	s     *mysqlstore.Store
	g     *dlock.Guard
	table string
}

func openMyGuard(db *sql.DB, o mysqlstore.Options, opts ...dlock.Option) (*myGuard, error) {
	s, err := mysqlstore.New(db, o)
	if err != nil {
		return nil, err
	}
	g, err := dlock.NewGuard(s, time.Hour, opts...)
	if err != nil {
		return nil, err
	}
	return &myGuard{db: db, s: s, g: g, table: o.Table}, nil
}

func (g *myGuard) DoTx(c context.Context, key, fp string, mode sqltest.Mode, fn sqltest.TxFunc) (dlock.Result, error) {
	var opts []myguard.Option
	if mode == sqltest.TwoStep {
		opts = append(opts, myguard.TwoStep())
	}
	return myguard.DoTx(c, g.s, g.g, key, fp, func(c context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error) {
		return fn(c, myTx{tx, g.table}, e)
	}, opts...)
}

func (g *myGuard) Plain(c context.Context, fn func(context.Context, sqltest.Tx) error) error {
	tx, err := g.db.BeginTx(c, nil)
	if err != nil {
		return err
	}
	if err := fn(c, myTx{tx, g.table}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (g *myGuard) Outside() sqltest.Tx { return myTx{g.db, g.table} }

func (g *myGuard) Charges(t testing.TB, key string) int {
	t.Helper()
	var n int
	if err := g.db.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM "+g.table+"_charges WHERE k = ?", key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// myTx is a transaction or a pool, writing to table's business table.
type myTx struct {
	q interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}
	table string
}

func (x myTx) Charge(c context.Context, key string, fence uint64) error {
	_, err := x.q.ExecContext(c, "INSERT INTO "+x.table+"_charges (k, fence) VALUES (?, ?)", key, fence)
	return err
}

func (x myTx) Unbound(c context.Context) error {
	_, err := x.q.ExecContext(c, "SET SESSION idle_transaction_timeout = 0")
	return err
}

func (x myTx) Work(c context.Context) error {
	_, err := x.q.ExecContext(c, "DO SLEEP(0.02)")
	return err
}

// myCounter reads the session's statement and commit counters (Questions,
// Com_commit) on a pool of one connection: with interpolateParams=true
// every statement is one round trip.
type myCounter struct{ db *sql.DB }

func (c myCounter) Count(t testing.TB) (int, int) {
	t.Helper()
	rows, err := c.db.QueryContext(ctxT(t), "SHOW SESSION STATUS WHERE Variable_name IN ('Questions', 'Com_commit')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	v := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		v[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return v["Questions"], v["Com_commit"]
}
