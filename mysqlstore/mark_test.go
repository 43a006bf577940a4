package mysqlstore_test

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// try runs one Acquire and returns its grant or its contention (exactly one
// of them; any other error fails the test).
func try(t *testing.T, s *mysqlstore.Store, key, token string, ttl time.Duration) (driver.Grant, *driver.ContendedError) {
	t.Helper()
	g, err := s.Acquire(ctxT(t), key, token, ttl)
	if err == nil {
		return g, nil
	}
	var ce *driver.ContendedError
	if !errors.As(err, &ce) {
		t.Fatalf("Acquire(%s): %v", token, err)
	}
	return driver.Grant{}, ce
}

// markOf reads key's mark: the marked digest (nil: none) and whether the
// mark is fresh on the server clock.
func markOf(t *testing.T, db *sql.DB, table, key string) (owner []byte, fresh bool) {
	t.Helper()
	err := db.QueryRowContext(ctxT(t), "SELECT next_owner, IFNULL(next_due > UTC_TIMESTAMP(6), FALSE) FROM "+table+"_locks WHERE name = ?", []byte(key)).
		Scan(&owner, &fresh)
	if err != nil {
		t.Fatal(err)
	}
	return owner, fresh
}

func digestOf(token string) []byte { d := sha256.Sum256([]byte(token)); return d[:] }

// assignModes are MariaDB's two assignment orders (DSN parameter): left to
// right, and all at once; Acquire's statement is written for both.
var assignModes = []string{"", "sql_mode=%27SIMULTANEOUS_ASSIGNMENT%27"}

// storeIn returns a lease store on a fresh prefix whose pool runs with the
// DSN parameter mode, and that pool.
func storeIn(t *testing.T, mode string) (*mysqlstore.Store, *sql.DB, mysqlstore.Options) {
	t.Helper()
	_, opts := migrated(t, mysqlstore.Options{})
	db := openDB(t, shared(t).DSN(mode))
	var m string
	if err := db.QueryRow("SELECT @@sql_mode").Scan(&m); err != nil || (mode != "") != (m == "SIMULTANEOUS_ASSIGNMENT") {
		t.Fatalf("sql_mode %q, %v for DSN parameter %q", m, err, mode)
	}
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, db, opts
}

// TestMarkReservesTheKeyForTheWaiter: A holds; B's Acquire is contended
// with a retry hint and marks the row; C's is contended without a hint and
// leaves B's mark; A releases; C's Acquire is contended (the key is
// reserved, Remaining > 0) and B's succeeds with a fence above A's. The
// hints are long (10 s) so that no timing matters. Both assignment orders.
// Control: the same sequence without the mark lets C take the key.
func TestMarkReservesTheKeyForTheWaiter(t *testing.T) {
	run := func(t *testing.T, mode string, mark bool) (cTook bool) {
		s, db, opts := storeIn(t, mode)
		if mark {
			mysqlstore.WithMarkTimes(s, 10*time.Second, 10*time.Second, 10*time.Second)
		} else {
			mysqlstore.WithoutMark(s)
		}
		const key, ttl = "k", 30 * time.Second
		ga, ce := try(t, s, key, "A", ttl)
		if ce != nil {
			t.Fatalf("A: %v", ce)
		}
		// B waits: it tries twice (a waiter's mark reserves the key once
		// renewed).
		for i := 0; i < 2; i++ {
			if _, ce = try(t, s, key, "B", ttl); ce == nil {
				t.Fatal("B took a held key")
			}
		}
		if mark && (ce.Retry <= 0 || ce.Remaining <= 0) {
			t.Fatalf("B: Retry %v, Remaining %v; want a hint and the holder's lease", ce.Retry, ce.Remaining)
		}
		if !mark && ce.Retry != 0 {
			t.Fatalf("B without the mark: Retry %v", ce.Retry)
		}
		if _, ce = try(t, s, key, "C", ttl); ce == nil || ce.Retry != 0 {
			t.Fatalf("C on a held key with B marked: %+v, want contended without a hint", ce)
		}
		if mark {
			if owner, fresh := markOf(t, db, opts.Table, key); string(owner) != string(digestOf("B")) || !fresh {
				t.Fatalf("mark after C: B's %v, fresh %v", string(owner) == string(digestOf("B")), fresh)
			}
		}
		if err := s.Release(ctxT(t), key, "A"); err != nil {
			t.Fatal(err)
		}
		if gc, ce := try(t, s, key, "C", ttl); ce == nil {
			if gc.Fence <= ga.Fence {
				t.Errorf("C's fence %d not above A's %d", gc.Fence, ga.Fence)
			}
			return true
		} else if ce.Remaining <= 0 || ce.Retry != 0 {
			t.Fatalf("C on the reserved key: Remaining %v, Retry %v", ce.Remaining, ce.Retry)
		}
		gb, ce := try(t, s, key, "B", ttl)
		if ce != nil {
			t.Fatalf("B on its reserved key: %v", ce)
		}
		if gb.Fence <= ga.Fence || gb.Holds != 1 {
			t.Fatalf("B's grant %+v after A's fence %d", gb, ga.Fence)
		}
		if owner, fresh := markOf(t, db, opts.Table, key); fresh {
			t.Fatalf("mark still fresh after B took the key (B's: %v)", string(owner) == string(digestOf("B")))
		}
		// The mark is gone: C now marks behind B.
		if _, ce := try(t, s, key, "C", ttl); ce == nil || ce.Retry <= 0 {
			t.Fatalf("C behind B: %+v, want a hint", ce)
		}
		return false
	}
	for _, mode := range assignModes {
		t.Run("mode="+mode, func(t *testing.T) {
			if run(t, mode, true) {
				t.Fatal("C took the key reserved for B")
			}
		})
	}
	t.Run("control without the mark", func(t *testing.T) {
		if !run(t, "", false) {
			t.Fatal("control: C did not take the freed key; the test cannot tell a reservation from none")
		}
	})
}

// TestMarkGoesStale: B marks twice (hint 1 ms, slack 2 ms) and goes away; once
// the server clock passes the mark's due time, A's release leaves the key
// free for anyone: C takes it at once. A holder whose lease expired is
// treated as released: B marks behind A (long hints), A expires, C is
// refused, B takes the key. A mark made once (a TryLock, a probe) reserves
// nothing, however long its hint. Both assignment orders.
func TestMarkGoesStale(t *testing.T) {
	for _, mode := range assignModes {
		t.Run("mode="+mode, func(t *testing.T) { markGoesStale(t, mode) })
	}
}

func markGoesStale(t *testing.T, mode string) {
	s, db, opts := storeIn(t, mode)
	mysqlstore.WithMarkTimes(s, time.Millisecond, time.Millisecond, 2*time.Millisecond)
	const ttl = 30 * time.Second
	if _, ce := try(t, s, "stale", "A", ttl); ce != nil {
		t.Fatal(ce)
	}
	for i := 0; i < 2; i++ {
		if _, ce := try(t, s, "stale", "B", ttl); ce == nil || ce.Retry != time.Millisecond {
			t.Fatalf("B: %+v, want a 1 ms hint", ce)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, fresh := markOf(t, db, opts.Table, "stale"); !fresh {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's mark still fresh after 5 s")
		}
		time.Sleep(time.Millisecond) // polling the server clock with a deadline
	}
	if err := s.Release(ctxT(t), "stale", "A"); err != nil {
		t.Fatal(err)
	}
	if _, ce := try(t, s, "stale", "C", ttl); ce != nil {
		t.Fatalf("C after B's mark went stale: %v", ce)
	}

	// An expired holding with a fresh mark is reserved like a released one.
	mysqlstore.WithMarkTimes(s, 10*time.Second, 10*time.Second, 10*time.Second)
	ga, ce := try(t, s, "expired", "A", 20*time.Millisecond)
	if ce != nil {
		t.Fatal(ce)
	}
	for i := 0; i < 2; i++ {
		if _, ce := try(t, s, "expired", "B", ttl); ce == nil || ce.Retry <= 0 {
			t.Fatalf("B behind A: %+v", ce)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		in, err := s.Inspect(ctxT(t), "expired")
		if err != nil {
			t.Fatal(err)
		}
		if !in.Held {
			break // free (reserved for B: Inspect says free)
		}
		if time.Now().After(deadline) {
			t.Fatal("A's 20 ms lease still held after 5 s")
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	if _, ce := try(t, s, "expired", "C", ttl); ce == nil || ce.Remaining <= 0 {
		t.Fatalf("C on the expired key reserved for B: %+v", ce)
	}
	if gb, ce := try(t, s, "expired", "B", ttl); ce != nil || gb.Fence <= ga.Fence {
		t.Fatalf("B on its reserved key: %+v, %v (A's fence %d)", gb, ce, ga.Fence)
	}

	if _, ce := try(t, s, "once", "A", ttl); ce != nil {
		t.Fatal(ce)
	}
	if _, ce := try(t, s, "once", "B", ttl); ce == nil || ce.Retry <= 0 {
		t.Fatalf("B's one try: %+v", ce)
	}
	if _, fresh := markOf(t, db, opts.Table, "once"); !fresh {
		t.Fatal("B's 10 s mark is not fresh")
	}
	if err := s.Release(ctxT(t), "once", "A"); err != nil {
		t.Fatal(err)
	}
	if _, ce := try(t, s, "once", "C", ttl); ce != nil {
		t.Fatalf("C after A's release, B having tried once: %v", ce)
	}
}

// TestMarkHintGrows: the hint starts at the least (1 ms) and grows with
// how long the waiter has been marked (an eighth of it), up to 100 ms; the
// mark's next_since is kept while the mark is the waiter's.
func TestMarkHintGrows(t *testing.T) {
	s := newStore(t, mysqlstore.Options{})
	if _, ce := try(t, s, "h", "A", 30*time.Second); ce != nil {
		t.Fatal(ce)
	}
	start := time.Now()
	_, ce := try(t, s, "h", "B", 30*time.Second)
	if ce == nil || ce.Retry != time.Millisecond {
		t.Fatalf("first mark: %+v, want a 1 ms hint", ce)
	}
	var last time.Duration
	for i := 0; last < 100*time.Millisecond; i++ {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("hint %v after 10 s, want 100 ms", last)
		}
		time.Sleep(ce.Retry) // the waiter's own pause: the workload, not synchronisation
		before := time.Since(start)
		if _, ce = try(t, s, "h", "B", 30*time.Second); ce == nil || ce.Retry < last {
			t.Fatalf("retry %d: %+v after a hint of %v", i, ce, last)
		}
		after := time.Since(start)
		// An eighth of the time marked, on the server's clock: between
		// the client's before/8 (less a millisecond of clock skew between
		// the two statements) and after/8.
		if want := min(max(after/8, time.Millisecond), 100*time.Millisecond); ce.Retry > want+time.Millisecond ||
			ce.Retry < min(before/8, 100*time.Millisecond)-time.Millisecond {
			t.Fatalf("hint %v after %v..%v marked", ce.Retry, before, after)
		}
		last = ce.Retry
	}
}
