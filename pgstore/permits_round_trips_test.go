package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"example.com/dlock/pgstore"
)

// queryCounter is a pgx tracer counting the statements a pool sends: with
// the default statement cache, each one round trip once it is prepared.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countedPool returns a pool on the test server whose statements qc counts.
func countedPool(t *testing.T) (*pgxpool.Pool, *queryCounter) {
	cfg, err := pgxpool.ParseConfig(server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	qc := new(queryCounter)
	cfg.ConnConfig.Tracer = qc
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, qc
}

// TestPermitRoundTrips: an uncontended AcquirePermits + ReleasePermits is 2
// statements (a function call each), 2 round trips once prepared, whether
// the key has another holding or not; a refused acquisition 1. Control:
// two plain statements on the same pool count 2, so the counter sees each.
// The sweep is off (it would send statements of its own).
func TestPermitRoundTrips(t *testing.T) {
	pool, qc := countedPool(t)
	s := newStore(t, pool, pgstore.Options{SweepInterval: -1})
	c := ctx(t)
	count := func(what string, want int64, f func() error) {
		t.Helper()
		n0 := qc.n.Load()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := qc.n.Load() - n0; got != want {
			t.Fatalf("%s: %d statements, want %d", what, got, want)
		}
	}
	cycle := func() error {
		if _, err := s.AcquirePermits(c, "k", "tok", 2, 1, time.Minute); err != nil {
			return err
		}
		return s.ReleasePermits(c, "k", "tok")
	}
	if err := cycle(); err != nil { // prepares the statements
		t.Fatal(err)
	}
	count("acquire+release", 2, cycle)
	if _, err := s.AcquirePermits(c, "k", "other", 2, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	count("acquire+release beside another holding", 2, cycle)
	if _, err := s.AcquirePermits(c, "k", "third", 2, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	count("refused acquire", 1, func() error {
		if _, err := s.AcquirePermits(c, "k", "fourth", 2, 1, time.Minute); err == nil {
			t.Fatal("a third permit of 2 was granted")
		}
		return nil
	})
	count("control: two plain statements", 2, func() error {
		for range 2 {
			if _, err := pool.Exec(c, "SELECT 1"); err != nil {
				return err
			}
		}
		return nil
	})
}
