package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
)

// noAnswer reports whether err is an error that is no definite answer.
func noAnswer(err error) bool {
	return err != nil && !errors.Is(err, driver.ErrNotHeld) && !errors.Is(err, driver.ErrNotAcquired)
}

// eventuallyOK retries fn until it returns nil or d passes.
func eventuallyOK(d time.Duration, fn func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // polling a restarting server, bounded
	}
}

// TestFaultServerKilled: the server is killed (-9) while a lease-table key
// and a session-lock key are held, and restarted. Invariants: during the
// outage every call fails with no definite answer; after the restart the
// lease holding is intact (the holder's Extend keeps its fence, another
// token contends) and a new key's fence is greater than every fence
// before. Negative control: the session lock, whose holding lived in the
// killed connection, is reported lost (Extend: ErrNotHeld) and another
// client takes the key: the test can see a loss.
func TestFaultServerKilled(t *testing.T) {
	srv := mysqlserver.Start(t)
	db := openDB(t, srv.DSN())
	opts := mysqlstore.Options{Table: "kill"}
	if err := mysqlstore.Migrate(ctxT(t), db, opts); err != nil {
		t.Fatal(err)
	}
	lease, _ := mysqlstore.New(db, opts)
	sess, _ := mysqlstore.NewSession(openDB(t, srv.DSN()), mysqlstore.SessionOptions{Table: "kill"})
	t.Cleanup(func() { sess.Close() })
	c := ctxT(t)
	g, err := lease.Acquire(c, "k", "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := sess.Acquire(c, "s", "sholder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	start := time.Now()
	oc, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, aerr := lease.Acquire(oc, "k", "other", time.Minute)
	_, eerr := lease.Extend(oc, "k", "holder", time.Minute)
	cancel()
	if !noAnswer(aerr) || !noAnswer(eerr) {
		t.Fatalf("during the outage: acquire %v, extend %v; want no definite answer", aerr, eerr)
	}
	outage := time.Since(start)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Since(start)
	var e driver.Grant
	if err := eventuallyOK(20*time.Second, func() error { e, err = lease.Extend(c, "k", "holder", time.Minute); return err }); err != nil || e.Fence != g.Fence {
		t.Fatalf("holder's Extend after the restart: %+v, %v (fence %d)", e, err, g.Fence)
	}
	t.Logf("outage calls %v; server greeting again %v after the kill; holder's Extend succeeded %v after it", outage, restarted, time.Since(start))
	if _, err := lease.Acquire(c, "k", "other", time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("another token after the restart: %v, want contended", err)
	}
	g2, err := lease.Acquire(c, "k2", "x", time.Minute)
	if err != nil || g2.Fence <= max(g.Fence, sg.Fence) {
		t.Fatalf("new key after the restart: %+v, %v; fence must pass %d", g2, err, max(g.Fence, sg.Fence))
	}
	if _, err := sess.Extend(c, "s", "sholder", time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("control: session holding after the restart: %v, want ErrNotHeld (lost)", err)
	}
	other, _ := mysqlstore.NewSession(openDB(t, srv.DSN()), mysqlstore.SessionOptions{Table: "kill"})
	t.Cleanup(func() { other.Close() })
	if _, err := other.Acquire(c, "s", "o", time.Minute); err != nil {
		t.Fatalf("control: another client after the restart: %v", err)
	}
}

// TestFaultAmbiguousExtend: an Extend reaches the server and is applied,
// but its reply is lost (the proxy drops the server's bytes, then resets
// the connection). Invariants: the caller gets no definite answer (no
// false loss), the retried Extend succeeds with the same fence, and
// another token still contends (no two owners). Control: the same cut
// before the statement reaches the server leaves the expiry unchanged, so
// the test does tell an applied statement from a lost one.
func TestFaultAmbiguousExtend(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	p := proxy(t, shared(t).Addr())
	s, _ := mysqlstore.New(onePool(t, p), opts)
	admin, _ := mysqlstore.New(db, opts)
	c := ctxT(t)
	g, err := s.Acquire(c, "k", "holder", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cut := func(d faultproxy.Direction) error {
		if _, err := s.Inspect(c, "k"); err != nil { // a live connection first: its handshake must not be cut
			t.Fatal(err)
		}
		p.Blackhole(d, true)
		oc, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := s.Extend(oc, "k", "holder", time.Hour)
		cancel()
		p.Blackhole(d, false)
		p.ResetAll()
		return err
	}
	remaining := func() time.Duration {
		info, err := admin.Inspect(c, "k")
		if err != nil || !info.Held {
			t.Fatalf("inspect: %+v %v", info, err)
		}
		return info.Remaining
	}
	// Control: the request never arrives.
	if err := cut(faultproxy.Upstream); !noAnswer(err) {
		t.Fatalf("cut before the server: %v, want no definite answer", err)
	}
	if r := remaining(); r > 21*time.Second {
		t.Fatalf("control: an Extend that never arrived moved the expiry (%v left)", r)
	}
	// The request arrives, the reply is lost.
	if err := cut(faultproxy.Downstream); !noAnswer(err) {
		t.Fatalf("reply lost: %v, want no definite answer (a false loss otherwise)", err)
	}
	if r := remaining(); r < 50*time.Minute {
		t.Fatalf("the Extend whose reply was lost was not applied (%v left): the test lost its premise", r)
	}
	e, err := s.Extend(c, "k", "holder", time.Hour)
	if err != nil || e.Fence != g.Fence {
		t.Fatalf("retried Extend: %+v, %v (fence %d)", e, err, g.Fence)
	}
	if _, err := s.Acquire(c, "k", "other", time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("another token: %v, want contended", err)
	}
}

// TestFaultAmbiguousAcquire: an Acquire applied on the server whose reply
// is lost leaves the key held by the token, never by two owners: another
// token contends, and the same token's retry re-enters (2 holds, same
// fence: the Client's unknown-outcome cleanup releases the extra hold).
func TestFaultAmbiguousAcquire(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	p := proxy(t, shared(t).Addr())
	s, _ := mysqlstore.New(onePool(t, p), opts)
	c := ctxT(t)
	// A live connection first, with Acquire's statement prepared on it:
	// the cut then hits the statement itself, not its prepare.
	if _, err := s.Acquire(c, "warm", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(c, "warm", "a"); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(faultproxy.Downstream, true)
	oc, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := s.Acquire(oc, "k", "a", time.Minute)
	cancel()
	p.Blackhole(faultproxy.Downstream, false)
	p.ResetAll()
	if !noAnswer(err) {
		t.Fatalf("reply lost: %v, want no definite answer", err)
	}
	if _, err := s.Acquire(c, "k", "b", time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("another token after the lost reply: %v, want contended", err)
	}
	g, err := s.Acquire(c, "k", "a", time.Minute)
	if err != nil || g.Holds != 2 {
		t.Fatalf("retry by the same token: %+v, %v; want a re-entry (2 holds)", g, err)
	}
}

// onePool opens a one-connection pool through p with one round trip per
// statement (interpolateParams: no server-side prepare, except Acquire's,
// which the store prepares once on the connection), so that a cut hits the
// statement itself.
func onePool(t *testing.T, p *faultproxy.Proxy) *sql.DB {
	db := openDB(t, mysqlserver.DSNFor(p.Addr(), mysqlserver.Database, "interpolateParams=true"))
	db.SetMaxOpenConns(1)
	return db
}

// TestFaultStaleHolderFencedWrite: a holder stops renewing (a paused
// process) and its 300 ms lease ends on the database clock; another owner
// takes the key with a greater fence and writes. Invariant: the stale
// holder's fenced write (UPDATE ... WHERE fence < its fence) changes no
// row. Negative control: the same stale write without the fence check
// overwrites the new owner's value.
func TestFaultStaleHolderFencedWrite(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	s, _ := mysqlstore.New(db, opts)
	res := opts.Table + "_res"
	if _, err := db.Exec("CREATE TABLE " + res + " (id INT PRIMARY KEY, v VARCHAR(20), fence BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO " + res + " VALUES (1, 'init', 0)"); err != nil {
		t.Fatal(err)
	}
	fencedWrite := func(v string, fence uint64) int64 {
		r, err := db.Exec("UPDATE "+res+" SET v = ?, fence = ? WHERE id = 1 AND fence < ?", v, fence, fence)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := r.RowsAffected()
		return n
	}
	c := ctxT(t)
	stale, err := s.Acquire(c, "k", "stale", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var fresh driver.Grant
	if err := eventuallyOK(5*time.Second, func() error { fresh, err = s.Acquire(c, "k", "fresh", time.Minute); return err }); err != nil {
		t.Fatalf("the key was not free after the stale holder's 300 ms lease: %v", err)
	}
	if fresh.Fence <= stale.Fence || fencedWrite("fresh", fresh.Fence) != 1 {
		t.Fatalf("new owner: fence %d (stale %d), or its write was refused", fresh.Fence, stale.Fence)
	}
	if n := fencedWrite("stale", stale.Fence); n != 0 {
		t.Fatalf("the stale holder's fenced write changed %d rows", n)
	}
	if _, err := s.Extend(c, "k", "stale", time.Minute); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("stale holder's Extend: %v, want ErrTaken", err)
	}
	// Control: without the fence check the stale write lands.
	if _, err := db.Exec("UPDATE "+res+" SET v = ? WHERE id = 1", "stale"); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := db.QueryRow("SELECT v FROM " + res).Scan(&v); err != nil || v != "stale" {
		t.Fatalf("control: %q, %v", v, err)
	}
}
