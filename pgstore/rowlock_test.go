package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// The row-lock mode on one server, one subtest per property.
func TestRowLock(t *testing.T) {
	srv := sessServer(t)
	pool := sessPool(t, srv.URL(), 10)
	if _, err := pool.Exec(tctx(t), `CREATE TABLE IF NOT EXISTS rl_data (k text PRIMARY KEY, v int NOT NULL); DELETE FROM rl_data`); err != nil {
		t.Fatal(err)
	}
	t.Run("LockAndWriteCommitOrRollBackTogether", func(t *testing.T) { rowCommitTogether(t, pool) })
	t.Run("NoWaitFailsFastWaitSucceeds", func(t *testing.T) { rowNoWait(t, pool) })
	t.Run("KilledHolderCannotWrite", func(t *testing.T) { rowKilledHolder(t, pool) })
	t.Run("DatabaseSQL", func(t *testing.T) { rowDB(t, srv.URL()) })
	t.Run("InvalidArguments", func(t *testing.T) { rowInvalid(t, pool) })
	t.Run("CounterTwoProcessesNoLostUpdate", func(t *testing.T) { rowCounter(t, srv.URL(), pool, "rowlock", true) })
	t.Run("CounterWithoutForUpdateLosesUpdates", func(t *testing.T) { rowCounter(t, srv.URL(), pool, "none", false) })
}

func value(t *testing.T, pool *pgxpool.Pool, k string) (int, bool) {
	t.Helper()
	var v int
	err := pool.QueryRow(tctx(t), `SELECT v FROM rl_data WHERE k = $1`, k).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

func put(tx pgx.Tx, k string, v int) error {
	_, err := tx.Exec(context.Background(), `INSERT INTO rl_data (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = $2`, k, v)
	return err
}

func rowCommitTogether(t *testing.T, pool *pgxpool.Pool) {
	key := t.Name()
	boom := errors.New("boom")
	err := pgstore.WithRowLock(tctx(t), pool, key, pgstore.RowLockOptions{}, func(tx pgx.Tx) error {
		if err := put(tx, key, 1); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("fn's error: got %v", err)
	}
	if _, ok := value(t, pool, key); ok {
		t.Fatal("the write of a failed fn was committed")
	}
	func() {
		defer func() {
			if r := recover(); r != "panic in fn" {
				t.Fatalf("recovered %v, want fn's panic", r)
			}
		}()
		_ = pgstore.WithRowLock(tctx(t), pool, key, pgstore.RowLockOptions{}, func(tx pgx.Tx) error {
			_ = put(tx, key, 2)
			panic("panic in fn")
		})
	}()
	if _, ok := value(t, pool, key); ok {
		t.Fatal("the write of a panicking fn was committed")
	}
	// The lock was released both times: NOWAIT gets it at once.
	if err := pgstore.WithRowLock(tctx(t), pool, key, pgstore.RowLockOptions{NoWait: true}, func(tx pgx.Tx) error { return put(tx, key, 3) }); err != nil {
		t.Fatal(err)
	}
	if v, ok := value(t, pool, key); !ok || v != 3 {
		t.Fatalf("committed value = %d, %v; want 3", v, ok)
	}
}

// holdRow holds key's row lock in a goroutine until the returned release
// is called; it returns once the lock is held.
func holdRow(t *testing.T, pool *pgxpool.Pool, key string, inTx func(pgx.Tx)) (release func() error) {
	t.Helper()
	held, rel, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- pgstore.WithRowLock(context.Background(), pool, key, pgstore.RowLockOptions{}, func(tx pgx.Tx) error {
			if inTx != nil {
				inTx(tx)
			}
			close(held)
			<-rel
			return put(tx, key+"/holder", 1)
		})
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("holder: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("holder did not get the lock")
	}
	var once sync.Once
	return func() error {
		once.Do(func() { close(rel) })
		return <-done
	}
}

func rowNoWait(t *testing.T, pool *pgxpool.Pool) {
	key := t.Name()
	release := holdRow(t, pool, key, nil)
	start := time.Now()
	ran := false
	err := pgstore.WithRowLock(tctx(t), pool, key, pgstore.RowLockOptions{NoWait: true}, func(pgx.Tx) error { ran = true; return nil })
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || !errors.Is(err, dlock.ErrNotAcquired) || ran {
		t.Fatalf("NOWAIT on a held row: %v (fn ran: %v); want *ContendedError matching dlock.ErrNotAcquired", err, ran)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("NOWAIT took %v", el)
	}
	// A wait bounded by ctx ends with ErrNotAcquired and runs nothing.
	short, cancel := context.WithTimeout(tctx(t), 300*time.Millisecond)
	err = pgstore.WithRowLock(short, pool, key, pgstore.RowLockOptions{}, func(pgx.Tx) error { ran = true; return nil })
	cancel()
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("bounded wait on a held row: %v (fn ran: %v)", err, ran)
	}
	// A waiter gets the row once the holder commits, and sees its write.
	got := make(chan error, 1)
	go func() {
		got <- pgstore.WithRowLock(tctx(t), pool, key, pgstore.RowLockOptions{}, func(tx pgx.Tx) error {
			var v int
			return tx.QueryRow(context.Background(), `SELECT v FROM rl_data WHERE k = $1`, key+"/holder").Scan(&v)
		})
	}()
	select {
	case err := <-got:
		t.Fatalf("the waiter returned while the row was held: %v", err)
	case <-time.After(200 * time.Millisecond): // the waiter is waiting (no answer is the point)
	}
	if err := release(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after the holder committed: %v", err)
	}
}

func rowKilledHolder(t *testing.T, pool *pgxpool.Pool) {
	key := t.Name()
	var pid uint32
	release := holdRow(t, pool, key, func(tx pgx.Tx) {
		pid = tx.Conn().PgConn().PID()
		_ = put(tx, key, 1)
	})
	// An administrator (or a failover) ends the holder's session.
	var ok bool
	if err := pool.QueryRow(tctx(t), `SELECT pg_terminate_backend($1)`, int(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend: %v, %v", ok, err)
	}
	// The next locker gets the row (NOWAIT) as soon as the backend is gone
	// (pg_terminate_backend only signals it).
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := pgstore.WithRowLock(tctx(t), pool, key, pgstore.RowLockOptions{NoWait: true}, func(tx pgx.Tx) error { return nil })
		if err == nil {
			break
		}
		if !errors.Is(err, dlock.ErrNotAcquired) || time.Now().After(deadline) {
			t.Fatalf("the row is not free after its holder was killed: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	if err := release(); err == nil {
		t.Fatal("the killed holder committed")
	}
	for _, k := range []string{key, key + "/holder"} {
		if _, ok := value(t, pool, k); ok {
			t.Fatalf("the killed holder's write %q is visible", k)
		}
	}
	// Control: a write made outside the lock's transaction (a lease-style
	// lock, then an autocommitted write) lands after the same kill.
	if _, err := pool.Exec(tctx(t), `INSERT INTO rl_data (k, v) VALUES ($1, 1)`, key+"/outside"); err != nil {
		t.Fatal(err)
	}
	if _, ok := value(t, pool, key+"/outside"); !ok {
		t.Fatal("control: the write outside the lock's transaction is missing")
	}
}

func rowDB(t *testing.T, url string) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key := t.Name()
	if err := pgstore.WithRowLockDB(tctx(t), db, key, pgstore.RowLockOptions{}, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO rl_data (k, v) VALUES ($1, 7)`, key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`SELECT 1 FROM dlock_rows WHERE name = $1 FOR UPDATE`, key); err != nil {
		t.Fatal(err)
	}
	err = pgstore.WithRowLockDB(tctx(t), db, key, pgstore.RowLockOptions{NoWait: true}, func(*sql.Tx) error { return nil })
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("NOWAIT through database/sql on a held row: %v", err)
	}
}

func rowInvalid(t *testing.T, pool *pgxpool.Pool) {
	nop := func(pgx.Tx) error { return nil }
	for name, err := range map[string]error{
		"empty key":  pgstore.WithRowLock(tctx(t), pool, "", pgstore.RowLockOptions{}, nop),
		"NUL in key": pgstore.WithRowLock(tctx(t), pool, "a\x00b", pgstore.RowLockOptions{}, nop),
		"bad table":  pgstore.WithRowLock(tctx(t), pool, "k", pgstore.RowLockOptions{Table: "x; DROP"}, nop),
		"nil fn":     pgstore.WithRowLock(tctx(t), pool, "k", pgstore.RowLockOptions{}, nil),
	} {
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// Counter: goroutines in this process and in a child process each add 1 to
// a counter N times with a read, a pause and a write. With the row lock no
// update is lost; without it (the negative control) some are.
const (
	counterWorkers = 4
	counterRounds  = 25
)

func rowCounter(t *testing.T, url string, pool *pgxpool.Pool, mode string, wantExact bool) {
	key := "counter-" + mode
	if _, err := pool.Exec(tctx(t), `INSERT INTO rl_data (k, v) VALUES ($1, 0) ON CONFLICT (k) DO UPDATE SET v = 0`, key); err != nil {
		t.Fatal(err)
	}
	cmd := roles.Command(tctx(t), "counter", "PGSTORE_CHILD_URL="+url, "PGSTORE_CHILD_MODE="+mode, "PGSTORE_CHILD_KEY="+key)
	out := make(chan error, 1)
	var buf []byte
	go func() {
		var err error
		buf, err = cmd.CombinedOutput()
		out <- err
	}()
	errs := counterWork(url, mode, key)
	if err := <-out; err != nil {
		t.Fatalf("child: %v\n%s", err, buf)
	}
	if errs != nil {
		t.Fatal(errs)
	}
	v, _ := value(t, pool, key)
	total := 2 * counterWorkers * counterRounds
	t.Logf("mode %s: counter %d of %d increments", mode, v, total)
	if wantExact && v != total {
		t.Fatalf("lost updates under the row lock: %d of %d", v, total)
	}
	if !wantExact && v == total {
		t.Fatalf("negative control: without FOR UPDATE no update was lost (%d): the test cannot see lost updates", v)
	}
}

// The child process of rowCounter.
var _ = roles.Register("counter", func() error {
	return counterWork(os.Getenv("PGSTORE_CHILD_URL"), os.Getenv("PGSTORE_CHILD_MODE"), os.Getenv("PGSTORE_CHILD_KEY"))
})

// counterWork runs counterWorkers goroutines of counterRounds increments.
func counterWork(url, mode, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	incr := func(tx pgx.Tx) error {
		var v int
		if err := tx.QueryRow(ctx, `SELECT v FROM rl_data WHERE k = $1`, key).Scan(&v); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.002)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE rl_data SET v = $2 WHERE k = $1`, key, v+1)
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, counterWorkers)
	for range counterWorkers {
		wg.Go(func() {
			for i := range counterRounds {
				var err error
				if mode == "rowlock" {
					err = pgstore.WithRowLock(ctx, pool, key, pgstore.RowLockOptions{}, incr)
				} else {
					err = pgx.BeginFunc(ctx, pool, incr)
				}
				if err != nil {
					errs <- fmt.Errorf("round %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
