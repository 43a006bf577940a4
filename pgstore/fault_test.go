package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Faults on the lease store (pgstore.Store) and the session store: each
// test states its invariant and has a negative control that breaks it.

// leaseStore returns a lease store on pool, closed when the test ends.
func leaseStore(t testing.TB, pool *pgxpool.Pool) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(pool, pgstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// proxied returns a fault proxy in front of srvAddr, closed at the end.
func proxied(t testing.TB, srvAddr string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(srvAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// remainingMicros reads key's remaining lease on the database clock.
func remainingMicros(t *testing.T, admin *pgxpool.Pool, key string) int64 {
	t.Helper()
	var us int64
	if err := admin.QueryRow(tctx(t), `SELECT coalesce((SELECT (extract(epoch FROM expires_at - now()) * 1e6)::bigint FROM dlock_locks WHERE name = $1), -1)`, key).Scan(&us); err != nil {
		t.Fatal(err)
	}
	return us
}

// TestFaultAmbiguousExtend (pglock #175): an Extend whose reply is lost
// (held by the proxy, then the connection reset in the middle of the
// statement) after the server applied it returns no definite answer; the
// retry succeeds with the same fence (the statement is idempotent: it sets
// the expiry, it does not rotate a version), the key stays with its owner
// past its original lease, and nobody else gets it. Negative control: a
// pglock-style heartbeat that rotates a record version reports the same
// holder lost after the same fault.
func TestFaultAmbiguousExtend(t *testing.T) {
	srv := sessServer(t)
	p := proxied(t, srv.Addr())
	admin := sessPool(t, srv.URL(), 4)
	// One connection, its statements prepared by a first round: the
	// faulty call is then one round trip, applied before its reply.
	st := leaseStore(t, sessPool(t, srv.URLFor(p.Addr()), 1))
	other := leaseStore(t, admin)
	key, tok := t.Name(), "owner"
	const ttl = 2 * time.Second
	g, err := st.Acquire(tctx(t), key, tok, ttl)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := st.Extend(tctx(t), key, tok, ttl); err != nil {
		t.Fatal(err)
	}
	ambiguous(t, p, func(ctx context.Context) error { _, err := st.Extend(ctx, key, tok, 30*time.Second); return err },
		func() bool { return remainingMicros(t, admin, key) > int64(10*time.Second/time.Microsecond) })
	e, err := st.Extend(tctx(t), key, tok, 30*time.Second)
	if err != nil || e.Fence != g.Fence {
		t.Fatalf("retried Extend after the ambiguous one: %+v, %v; want success with fence %d (a false 'lost')", e, err, g.Fence)
	}
	time.Sleep(time.Until(start.Add(ttl + 500*time.Millisecond))) // outliving the original lease is the point
	if _, err := other.Acquire(tctx(t), key, "intruder", ttl); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("another owner after the ambiguous Extend: %v; want contended (two owners)", err)
	}
	if err := st.Release(tctx(t), key, tok); err != nil {
		t.Fatal(err)
	}

	// Negative control: a rotating-version heartbeat, as pglock's.
	if _, err := admin.Exec(tctx(t), `CREATE TABLE IF NOT EXISTS rvn_locks (name text PRIMARY KEY, rvn bigint NOT NULL);
		INSERT INTO rvn_locks VALUES ('k', 1) ON CONFLICT (name) DO UPDATE SET rvn = 1`); err != nil {
		t.Fatal(err)
	}
	ctl := sessPool(t, srv.URLFor(p.Addr()), 1)
	heartbeat := func(ctx context.Context, old, next int64) (bool, error) {
		tag, err := ctl.Exec(ctx, `UPDATE rvn_locks SET rvn = $2 WHERE name = 'k' AND rvn = $1`, old, next)
		return tag.RowsAffected() == 1, err
	}
	if _, err := heartbeat(tctx(t), 0, 0); err != nil { // prepares it
		t.Fatal(err)
	}
	ambiguous(t, p, func(ctx context.Context) error { _, err := heartbeat(ctx, 1, 2); return err }, func() bool {
		var rvn int64
		_ = admin.QueryRow(tctx(t), `SELECT rvn FROM rvn_locks WHERE name = 'k'`).Scan(&rvn)
		return rvn == 2
	})
	if ok, err := heartbeat(tctx(t), 1, 3); err != nil || ok {
		t.Fatalf("control: the rotating heartbeat's retry = %v, %v; want it to fail (a false 'lost'), or the fault did not bite", ok, err)
	}
}

// ambiguous runs call with its reply held by the proxy until applied
// reports the server applied it, then resets every connection and lets the
// proxy go: the call must return an error that is no definite answer.
func ambiguous(t *testing.T, p *faultproxy.Proxy, call func(context.Context) error, applied func() bool) {
	t.Helper()
	release := p.Hold(faultproxy.Downstream)
	ctx, cancel := context.WithTimeout(tctx(t), 3*time.Second)
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	ok := faulttest.Within(10*time.Second, applied)
	p.ResetAll()
	release()
	err := <-done
	cancel()
	if !ok {
		t.Fatal("the server never applied the call")
	}
	if err == nil || errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("a call whose reply was lost returned %v; want an error that is no definite answer", err)
	}
}

// TestFaultAmbiguousAcquire: an Acquire applied but unanswered, then
// retried with the same token, re-enters (two holds, one fence): the
// holder owns the key once, nobody else gets it, and two releases free it
// (the dlock Client gives such ghost holds back).
func TestFaultAmbiguousAcquire(t *testing.T) {
	srv := sessServer(t)
	p := proxied(t, srv.Addr())
	admin := sessPool(t, srv.URL(), 4)
	st := leaseStore(t, sessPool(t, srv.URLFor(p.Addr()), 1))
	other := leaseStore(t, admin)
	key, tok := t.Name(), "owner"
	if _, err := st.Acquire(tctx(t), key+"/warm", tok, time.Second); err != nil { // prepares it
		t.Fatal(err)
	}
	// The key gets a free row first, so that the Acquire below is one
	// statement (the update of a free row), the one whose reply is lost.
	if _, err := other.Acquire(tctx(t), key, "before", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(tctx(t), key, "before"); err != nil {
		t.Fatal(err)
	}
	ambiguous(t, p, func(ctx context.Context) error { _, err := st.Acquire(ctx, key, tok, 30*time.Second); return err },
		func() bool { return remainingMicros(t, admin, key) > 0 })
	g, err := st.Acquire(tctx(t), key, tok, 30*time.Second)
	if err != nil || g.Holds != 2 {
		t.Fatalf("retried Acquire = %+v, %v; want the applied holding re-entered (holds 2)", g, err)
	}
	if _, err := other.Acquire(tctx(t), key, "intruder", time.Second); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("another owner: %v", err)
	}
	for range 2 {
		if err := st.Release(tctx(t), key, tok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Acquire(tctx(t), key, "next", time.Second); err != nil {
		t.Fatalf("after two releases: %v", err)
	}
}

// TestFaultSessionReset: the session store's connection is reset in the
// middle of a check. Invariant: never two owners. The reset ends the
// session, so the server frees the lock: the holder must learn it (its
// Extend returns ErrNotHeld, never success) while another store takes the
// key. A reply that is only delayed (no reset) must not look lost.
// Negative control: a liveness check that pings the pool instead of the
// holding's connection says "alive" while the other store holds the key.
func TestFaultSessionReset(t *testing.T) {
	srv := sessServer(t)
	p := proxied(t, srv.Addr())
	pool := sessPool(t, srv.URLFor(p.Addr()), 4)
	s := newSession(t, pool, pgstore.SessionOptions{CheckInterval: 5 * time.Second})
	other := newSession(t, sessPool(t, srv.URL(), 4), pgstore.SessionOptions{})
	key := t.Name()
	g, err := s.Acquire(tctx(t), key, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A delayed reply: no answer within the caller's deadline, no loss.
	release := p.Hold(faultproxy.Downstream)
	ctx, cancel := context.WithTimeout(tctx(t), 300*time.Millisecond)
	_, err = s.Extend(ctx, key, "a", time.Minute)
	cancel()
	release()
	if err == nil || errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend with a delayed reply: %v; want no definite answer", err)
	}
	if e, err := s.Extend(tctx(t), key, "a", time.Minute); err != nil || e.Fence != g.Fence {
		t.Fatalf("Extend after the delay: %+v, %v; want still held (a false 'lost')", e, err)
	}
	// A reset in the middle of a check: the session ends.
	release = p.Hold(faultproxy.Downstream)
	ctx, cancel = context.WithTimeout(tctx(t), 300*time.Millisecond)
	_, _ = s.Extend(ctx, key, "a", time.Minute)
	cancel()
	p.ResetAll()
	release()
	var g2 driver.Grant
	if !faulttest.Within(10*time.Second, func() bool { g2, err = other.Acquire(tctx(t), key, "b", time.Minute); return err == nil }) {
		t.Fatalf("the key is still held 10s after its connection was reset: %v", err)
	}
	if g2.Fence <= g.Fence {
		t.Fatalf("fence %d after %d", g2.Fence, g.Fence)
	}
	if _, err := s.Extend(tctx(t), key, "a", time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("the reset holder's Extend while another holds the key: %v; want ErrNotHeld (two owners)", err)
	}
	// Negative control: a monitor that pings the pool (any connection)
	// instead of checking the holding's own would call the holder alive
	// now, while the other store holds the key: two owners.
	if naiveHeld := pool.Ping(tctx(t)) == nil; !naiveHeld {
		t.Fatal("control: the pool ping failed, so the control shows nothing")
	}
}
