package pgstore_test

import (
	"context"
	"example.com/dlock/pgstore/pgguard"
	"fmt"
	"testing"

	"example.com/dlock"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
)

// BenchmarkDoTx: one business insert per request, in a plain transaction
// and in DoTx (a fresh key each time: begin, the transaction with the
// completion, commit), on one pool; the difference is the guard's cost.
func BenchmarkDoTx(b *testing.B) {
	pool := newPool(b)
	table := uniqTable(b, pool)
	if _, err := pool.Exec(ctx(b), "CREATE TABLE "+table+"_charges (key text NOT NULL, fence bigint NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	s := newStore(b, pool, pgstore.Options{Table: table})
	g, err := dlock.NewGuard(s, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("PlainTx", func(b *testing.B) {
		c := ctx(b)
		for i := 0; b.Loop(); i++ {
			if err := pgx.BeginFunc(c, pool, func(tx pgx.Tx) error {
				return insertCharge(c, tx, table, fmt.Sprint("plain-", i), 0)
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DoTx", func(b *testing.B) {
		c := ctx(b)
		run := tok() // keys of this run only: -count runs it again on the same table
		for i := 0; b.Loop(); i++ {
			key := fmt.Sprint(run, "-", i)
			if r, err := pgguard.DoTx(c, s, g, key, "fp", func(ctx context.Context, tx pgx.Tx, e dlock.Execution) ([]byte, error) {
				return []byte("ok"), insertCharge(ctx, tx, table, key, e.Fence)
			}); err != nil || r.Replayed {
				b.Fatal(r, err)
			}
		}
	})
}
