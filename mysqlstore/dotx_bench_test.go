package mysqlstore_test

import (
	"context"
	"database/sql"
	"example.com/dlock/mysqlstore/myguard"
	"fmt"
	"testing"

	"example.com/dlock"
	"example.com/dlock/mysqlstore"
)

// BenchmarkDoTx: one business insert per request, in a plain transaction
// and in DoTx (a fresh key each time: begin, the transaction with the
// completion, commit), on one pool (interpolateParams=true); the
// difference is the guard's cost.
func BenchmarkDoTx(b *testing.B) {
	_, opts := migrated(b, mysqlstore.Options{})
	db := openDB(b, shared(b).DSN("interpolateParams=true"))
	if _, err := db.ExecContext(ctxT(b), "CREATE TABLE "+opts.Table+"_charges (k VARCHAR(64) NOT NULL, fence BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"); err != nil {
		b.Fatal(err)
	}
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		b.Fatal(err)
	}
	g, err := dlock.NewGuard(s, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("PlainTx", func(b *testing.B) {
		c := ctxT(b)
		for i := 0; b.Loop(); i++ {
			if err := plainTx(c, db, func(tx *sql.Tx) error {
				return insertCharge(c, tx, opts.Table, fmt.Sprint("plain-", i), 0)
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DoTx", func(b *testing.B) {
		c := ctxT(b)
		run := uniqTable(b) // keys of this run only: -count runs it again on the same table
		for i := 0; b.Loop(); i++ {
			key := fmt.Sprint(run, "-", i)
			if r, err := myguard.DoTx(c, s, g, key, "fp", func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error) {
				return []byte("ok"), insertCharge(ctx, tx, opts.Table, key, e.Fence)
			}); err != nil || r.Replayed {
				b.Fatal(r, err)
			}
		}
	})
}
