package pgstore_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/sqltest"
	"example.com/dlock/pgstore"
	"example.com/dlock/pgstore/pgguard"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgBackend is the package's server as the SQL test kit sees it.
type pgBackend struct{}

func (pgBackend) Table(t testing.TB) string {
	t.Helper()
	admin := newPool(t)
	table := uniqTable(t, admin)
	if _, err := admin.Exec(ctx(t), "CREATE TABLE "+table+"_charges (key text NOT NULL, fence bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return table
}

func (pgBackend) Guard(t testing.TB, table string, broken sqltest.Broken, opts ...dlock.Option) sqltest.Guard {
	t.Helper()
	g, err := openPGGuard(newPool(t), table, pgstore.Options{Table: table}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(g.s) })
	switch broken {
	case sqltest.NoFenceCheck:
		pgstore.WithoutFenceCheck(g.s)
	case sqltest.WaitingBegin:
		pgstore.WithWaitingFoldedBegin(g.s)
	}
	return g
}

// Idle: the folded begin bounds the transaction's idle time by the lease
// (idle_in_transaction_session_timeout); opts give the lease.
func (b pgBackend) Idle(t testing.TB, table string, _ time.Duration, opts ...dlock.Option) sqltest.Guard {
	return b.Guard(t, table, sqltest.Sound, opts...)
}

func (pgBackend) Counted(t testing.TB, table string) (sqltest.Guard, sqltest.Counter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	c := &pgCounter{}
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	g, err := openPGGuard(pool, table, pgstore.Options{Table: table, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(g.s) })
	return g, c
}

func (pgBackend) StartExecutor(t testing.TB, c context.Context, env ...string) *faulttest.Child {
	return roles.Start(t, c, "dotx-executor", append(env, "PGSTORE_CHILD_URL="+server(t).URL())...)
}

var _ = roles.Register("dotx-executor", func() error {
	return sqltest.RunExecutor(func(table string, opts ...dlock.Option) (sqltest.Guard, error) {
		pool, err := pgxpool.New(context.Background(), os.Getenv("PGSTORE_CHILD_URL"))
		if err != nil {
			return nil, err
		}
		return openPGGuard(pool, table, pgstore.Options{Table: table}, opts...)
	})
})

// pgGuard is a store on a pool and a Guard on it.
type pgGuard struct {
	pool  *pgxpool.Pool
	s     *pgstore.Store
	g     *dlock.Guard
	table string
}

func openPGGuard(pool *pgxpool.Pool, table string, o pgstore.Options, opts ...dlock.Option) (*pgGuard, error) {
	s, err := pgstore.New(pool, o)
	if err != nil {
		return nil, err
	}
	g, err := dlock.NewGuard(s, time.Hour, opts...)
	if err != nil {
		return nil, err
	}
	return &pgGuard{pool: pool, s: s, g: g, table: table}, nil
}

func (g *pgGuard) DoTx(c context.Context, key, fp string, mode sqltest.Mode, fn sqltest.TxFunc) (dlock.Result, error) {
	var opts []pgguard.Option
	if mode == sqltest.TwoStep {
		opts = append(opts, pgguard.TwoStep())
	}
	return pgguard.DoTx(c, g.s, g.g, key, fp, func(c context.Context, tx pgx.Tx, e dlock.Execution) ([]byte, error) {
		return fn(c, pgTx{tx, g.table}, e)
	}, opts...)
}

func (g *pgGuard) Plain(c context.Context, fn func(context.Context, sqltest.Tx) error) error {
	return pgx.BeginFunc(c, g.pool, func(tx pgx.Tx) error { return fn(c, pgTx{tx, g.table}) })
}

func (g *pgGuard) Outside() sqltest.Tx { return pgTx{g.pool, g.table} }

func (g *pgGuard) Charges(t testing.TB, key string) int {
	t.Helper()
	var n int
	if err := g.pool.QueryRow(ctx(t), "SELECT count(*) FROM "+g.table+"_charges WHERE key = $1", key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pgTx is a transaction or a pool, writing to table's business table.
type pgTx struct {
	q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}
	table string
}

func (x pgTx) Charge(c context.Context, key string, fence uint64) error {
	_, err := x.q.Exec(c, "INSERT INTO "+x.table+"_charges (key, fence) VALUES ($1, $2)", key, int64(fence))
	return err
}

func (x pgTx) Unbound(c context.Context) error {
	_, err := x.q.Exec(c, "SET LOCAL idle_in_transaction_session_timeout = 0")
	return err
}

func (x pgTx) Work(c context.Context) error {
	_, err := x.q.Exec(c, "SELECT pg_sleep(0.02)")
	return err
}

// pgCounter counts the statements pgx sends (each one round trip once
// prepared) and the commits among them: COMMIT, and any statement sent
// outside a transaction but BEGIN.
type pgCounter struct{ statements, commits atomic.Int64 }

func (c *pgCounter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.statements.Add(1)
	sql := strings.ToLower(strings.TrimSpace(data.SQL))
	if sql == "commit" || conn.PgConn().TxStatus() == 'I' && sql != "begin" {
		c.commits.Add(1)
	}
	return ctx
}

func (c *pgCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *pgCounter) Count(testing.TB) (int, int) {
	return int(c.statements.Load()), int(c.commits.Load())
}
