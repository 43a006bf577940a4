package mysqlstore_test

import (
	"database/sql"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// interleave runs, on a fresh table, the interleaving that gives a fence
// drawn too early away: "from" holds the key; a test transaction locks its
// row; a Transfer from "from" starts and waits for the row; the
// transaction then gives the key a new holding of "from" with a fence from
// the table's sequence (from's release and re-acquire, which the store
// allows, made while the transfer waited) and commits. It returns that
// holding's fence and the fence the transfer got (an early store's
// (WithEarlyFence, if early) drawn before the wait).
func interleave(t *testing.T, early bool) (between, got uint64) {
	t.Helper()
	db, opts := migrated(t, mysqlstore.Options{})
	s, err := mysqlstore.New(openDB(t, shared(t).DSN("interpolateParams=true")), opts)
	if err != nil {
		t.Fatal(err)
	}
	if early {
		mysqlstore.WithEarlyFence(s)
	}
	if _, err := s.Acquire(ctxT(t), "hot", "from", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	locks := opts.Table + "_locks"
	tx, err := db.BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec("SELECT 1 FROM " + locks + " WHERE name = 'hot' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() {
		g, err := s.Transfer(ctxT(t), "hot", "from", "to", 10*time.Second)
		done <- result{g, err}
	}()
	waitBlocked(t, db, locks, done)
	if _, err := tx.Exec("UPDATE " + locks + " SET fence = NEXTVAL(" + opts.Table + "_fence), expires_at = UTC_TIMESTAMP(6) + INTERVAL 10 SECOND WHERE name = 'hot'"); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow("SELECT fence FROM " + locks + " WHERE name = 'hot'").Scan(&between); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the transfer that waited for the row: %v", r.err)
	}
	return between, r.g.Fence
}

type result struct {
	g   driver.Grant
	err error
}

// waitBlocked returns once a statement on table waits for a row lock (the
// transfer behind the test's row lock); it fails the test after 10 s, or
// if the transfer returns (done) without waiting.
func waitBlocked(t *testing.T, db *sql.DB, table string, done <-chan result) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case r := <-done:
			t.Fatalf("the transfer returned without waiting for the row the test locked: %+v, %v", r.g, r.err)
		default:
		}
		var n int
		err := db.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND LOCATE(?, trx_query) > 0", table).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the transfer never waited for the row the test locked")
		}
		// Polling the server's view, bounded by the deadline. InnoDB
		// refreshes INNODB_TRX only when it was not read for 100 ms: a
		// faster poll reads the same stale snapshot for ever.
		time.Sleep(150 * time.Millisecond)
	}
}
