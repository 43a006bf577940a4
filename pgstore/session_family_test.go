package pgstore_test

import (
	"context"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestSessionHasNoSemaphore: the session store (advisory locks keep no
// data, so no N) offers the read-write lock but not the semaphore, as
// docs/postgres.md says, so driver.As finds no Semaphore and the CLI's
// --permits refuses it (64). Control: the lease table on the same pool
// offers the semaphore.
func TestSessionHasNoSemaphore(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://u@127.0.0.1:1/none?pool_max_conns=4") // connects lazily: no I/O here
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	sess, err := pgstore.NewSession(pool, pgstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	lease, err := pgstore.New(pool, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close(context.Background())
	if _, ok := driver.As[driver.Semaphore](sess); ok {
		t.Error("the session store is a driver.Semaphore; docs/postgres.md says it is not")
	}
	if _, ok := driver.As[driver.RWMutex](sess); !ok {
		t.Error("the session store is no driver.RWMutex")
	}
	if _, ok := driver.As[driver.Semaphore](lease); !ok { // control
		t.Error("control: the lease table is no driver.Semaphore")
	}
}
