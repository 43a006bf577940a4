package mysqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/mysqlstore"
)

// TestTxRollbackNoReply: a transaction of the store (the RW lock's
// acquisition, the idempotency record's begin, the sweep) refused after its
// statements, whose ROLLBACK gets no reply (the proxy swallows every reply;
// the DSN has no readTimeout), returns within the rollback bound (300ms
// here) plus 10s of slack for a loaded machine; before, database/sql's
// Rollback, which has no context, waited forever. Then, replies flowing
// again, the store's one-connection pool serves the next transaction: the
// stuck connection was given up.
func TestTxRollbackNoReply(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	p := proxy(t, shared(t).Addr())
	s, err := mysqlstore.New(onePool(t, p), opts)
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(tx *sql.Tx) (bool, error) {
		var n int
		if err := tx.QueryRowContext(ctxT(t), "SELECT 1").Scan(&n); err != nil {
			return false, err
		}
		p.Blackhole(faultproxy.Downstream, true)
		return false, nil // refused: the transaction is rolled back
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- mysqlstore.InTx(ctxT(t), s, 300*time.Millisecond, refuse) }()
	select {
	case err := <-done:
		t.Logf("refused transaction returned %v after %v", err, time.Since(start).Round(time.Millisecond))
	case <-time.After(300*time.Millisecond + 10*time.Second):
		t.Fatal("a rollback without a reply did not return within its bound and 10s of slack")
	}
	p.Blackhole(faultproxy.Downstream, false)
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	if err := mysqlstore.InTx(ctx, s, time.Second, func(tx *sql.Tx) (bool, error) {
		_, err := tx.ExecContext(ctx, "SELECT 1")
		return true, err
	}); err != nil {
		t.Fatalf("the next transaction, replies flowing again: %v", err)
	}
}
