package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestReplica: a store pointed at a streaming replica is refused
// (ErrRefused, not retried) and its doctor fails the primary check; the
// primary's doctor warns about the asynchronous replica. Control: the same
// table on the primary takes the lock.
func TestReplica(t *testing.T) {
	primary := server(t)
	admin := newPool(t)
	table := uniqTable(t, admin)
	rep := primary.StartReplica(t)
	rpool, err := pgxpool.New(context.Background(), rep.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rpool.Close)
	var streaming int
	for deadline := time.Now().Add(30 * time.Second); streaming == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := admin.QueryRow(ctx(t), `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&streaming); err != nil {
			t.Fatal(err)
		}
	}
	if streaming == 0 {
		t.Fatal("the replica does not stream within 30s")
	}
	onReplica := newStore(t, rpool, pgstore.Options{Table: table})
	_, err = onReplica.Acquire(ctx(t), "k", tok(), time.Minute)
	if !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("Acquire on a replica = %v; want ErrRefused", err)
	}
	if c := doctor(t, onReplica)["primary"]; c.Status != driver.Fail {
		t.Errorf("doctor on a replica: %+v; want Fail", c)
	}
	onPrimary := newStore(t, admin, pgstore.Options{Table: table})
	if _, err := onPrimary.Acquire(ctx(t), "k", tok(), time.Minute); err != nil {
		t.Fatalf("Acquire on the primary (control): %v", err)
	}
	if c := doctor(t, onPrimary)["replication"]; c.Status != driver.Warn {
		t.Errorf("doctor on a primary with an async replica: %+v; want Warn", c)
	}
}
