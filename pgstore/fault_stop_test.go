package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestFaultHolderStopped: the holder is a child process, SIGSTOPped past
// its lease while another process takes the key, then continued.
//
// Lease mode: the stopped holder's write, fenced with its (older) fence,
// is rejected; the new holder's stays. Control: the same write without the
// fence overwrites the new holder's.
//
// Row-lock mode (IdleTimeout 1s): the server ends the stopped holder's
// idle transaction, the next locker gets the row, and the holder's write,
// made inside its transaction before the stop, never becomes visible: its
// commit fails. Control: a write the holder makes outside the transaction
// after it continues lands.
func TestFaultHolderStopped(t *testing.T) {
	srv := sessServer(t)
	admin := sessPool(t, srv.URL(), 4)
	if _, err := admin.Exec(tctx(t), `CREATE TABLE IF NOT EXISTS stop_data (k text PRIMARY KEY, v text NOT NULL, fence bigint NOT NULL DEFAULT 0); DELETE FROM stop_data`); err != nil {
		t.Fatal(err)
	}
	t.Run("Lease", func(t *testing.T) { stopLease(t, srv.URL(), admin) })
	t.Run("RowLock", func(t *testing.T) { stopRowLock(t, srv.URL(), admin) })
}

func stopLease(t *testing.T, url string, admin *pgxpool.Pool) {
	key := fmt.Sprint(t.Name(), "/", time.Now().UnixNano()) // a run of its own (-count)
	if _, err := admin.Exec(tctx(t), `INSERT INTO stop_data (k, v) VALUES ($1, 'init'), ($1 || '/unfenced', 'init')`, key); err != nil {
		t.Fatal(err)
	}
	c := roles.Start(t, t.Context(), "stop-lease", "PGSTORE_CHILD_URL="+url, "PGSTORE_CHILD_KEY="+key)
	oldFence, stopped := c.StopHolder("fence")
	other := leaseStore(t, admin)
	var g driver.Grant
	var err error
	defer func() {
		t.Logf("RESULT lease: next holder %v after the stop, fence %d > %d", time.Since(stopped).Round(time.Millisecond), g.Fence, oldFence)
	}()
	if !faulttest.Within(10*time.Second, func() bool { g, err = other.Acquire(tctx(t), key, "new", time.Minute); return err == nil }) {
		t.Fatalf("the stopped holder's lease did not end: %v", err)
	}
	if g.Fence <= oldFence {
		t.Fatalf("new fence %d, old %d", g.Fence, oldFence)
	}
	if n := fencedWrite(t, admin, key, "new holder", g.Fence); n != 1 {
		t.Fatalf("the new holder's fenced write changed %d rows", n)
	}
	if _, err := admin.Exec(tctx(t), `UPDATE stop_data SET v = 'new holder' WHERE k = $1 || '/unfenced'`, key); err != nil {
		t.Fatal(err)
	}
	faulttest.StaleLeaseWrite(c)
	want := map[string]string{key: "new holder", key + "/unfenced": "stopped holder"}
	for k, v := range want {
		var got string
		if err := admin.QueryRow(tctx(t), `SELECT v FROM stop_data WHERE k = $1`, k).Scan(&got); err != nil || got != v {
			t.Fatalf("%s = %q, %v; want %q", k, got, err, v)
		}
	}
}

// fencedWrite writes v at k if fence is at least the stored one.
func fencedWrite(t testing.TB, pool *pgxpool.Pool, k, v string, fence uint64) int64 {
	tag, err := pool.Exec(context.Background(), `UPDATE stop_data SET v = $2, fence = $3 WHERE k = $1 AND fence <= $3`, k, v, int64(fence))
	if err != nil {
		t.Fatal(err)
	}
	return tag.RowsAffected()
}

// The lease child: acquire with a 1 s lease, say the fence, wait for
// "write", then write fenced and unfenced and say how many rows changed.
var _ = roles.Register("stop-lease", func() error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGSTORE_CHILD_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.Options{SweepInterval: -1})
	if err != nil {
		return err
	}
	key := os.Getenv("PGSTORE_CHILD_KEY")
	g, err := st.Acquire(ctx, key, "stopped", time.Second)
	if err != nil {
		return err
	}
	return faulttest.StaleLeaseWriter(g.Fence, func() (int64, error) {
		tag, err := pool.Exec(ctx, `UPDATE stop_data SET v = 'stopped holder', fence = $2 WHERE k = $1 AND fence <= $2`, key, int64(g.Fence))
		return tag.RowsAffected(), err
	}, func() (int64, error) {
		tag, err := pool.Exec(ctx, `UPDATE stop_data SET v = 'stopped holder' WHERE k = $1 || '/unfenced'`, key)
		return tag.RowsAffected(), err
	})
})

func stopRowLock(t *testing.T, url string, admin *pgxpool.Pool) {
	key := fmt.Sprint(t.Name(), "/", time.Now().UnixNano())
	if _, err := admin.Exec(tctx(t), `INSERT INTO stop_data (k, v) VALUES ($1, 'init'), ($1 || '/outside', 'init')`, key); err != nil {
		t.Fatal(err)
	}
	c := roles.Start(t, t.Context(), "stop-rowlock", "PGSTORE_CHILD_URL="+url, "PGSTORE_CHILD_KEY="+key)
	c.Read("locked")
	c.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	var err error
	defer func() {
		t.Logf("RESULT row lock: the stopped holder's row taken %v after the stop", time.Since(stopped).Round(time.Millisecond))
	}()
	if !faulttest.Within(10*time.Second, func() bool {
		err = pgstore.WithRowLock(tctx(t), admin, key, pgstore.RowLockOptions{NoWait: true}, func(tx pgx.Tx) error {
			_, err := tx.Exec(context.Background(), `UPDATE stop_data SET v = 'new holder' WHERE k = $1`, key)
			return err
		})
		return err == nil
	}) {
		t.Fatalf("the stopped holder's row is still locked 10s after its 1s idle timeout: %v", err)
	}
	commit, outside := faulttest.StaleCommit(c)
	if commit == "ok" {
		t.Fatal("the stopped holder's transaction committed after another process took the row")
	}
	if outside != "1" {
		t.Fatalf("control: the write outside the transaction changed %s rows, want 1", outside)
	}
	var got string
	if err := admin.QueryRow(tctx(t), `SELECT v FROM stop_data WHERE k = $1`, key).Scan(&got); err != nil || got != "new holder" {
		t.Fatalf("row = %q, %v; want the new holder's write only", got, err)
	}
}

// The row-lock child: lock with IdleTimeout 1s, write inside the
// transaction, say "locked", wait for "commit", commit and say how it went,
// then write outside any transaction (the control).
var _ = roles.Register("stop-rowlock", func() error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGSTORE_CHILD_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	key := os.Getenv("PGSTORE_CHILD_KEY")
	err = pgstore.WithRowLock(ctx, pool, key, pgstore.RowLockOptions{IdleTimeout: time.Second}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE stop_data SET v = 'stopped holder' WHERE k = $1`, key); err != nil {
			return err
		}
		return faulttest.Locked()
	})
	return faulttest.StaleCommitter(err, func() (int64, error) {
		tag, err := pool.Exec(ctx, `UPDATE stop_data SET v = 'stopped holder' WHERE k = $1 || '/outside'`, key)
		return tag.RowsAffected(), err
	})
})
