package mysqlstore_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestSessionConnLimitIsUnavailable: with MaxConns 2 and 2 keys per
// connection, a fifth key's Acquire, and a queued wait, are refused with an
// error matching ErrConnLimit and driver.ErrUnavailable (a later attempt may
// succeed), and change nothing: still 2 connections pinned, the fifth key
// free for another client, the four keys still held. Control: with MaxConns
// 3 the same Acquire succeeds, and the same observation sees the change
// (the fifth key held, a third connection pinned).
func TestSessionConnLimitIsUnavailable(t *testing.T) {
	for _, maxConns := range []int{2, 3} {
		t.Run(fmt.Sprint("MaxConns", maxConns), func(t *testing.T) {
			_, opts := migrated(t, mysqlstore.Options{})
			s := newSession(t, opts.Table, mysqlstore.SessionOptions{MaxConns: maxConns, LocksPerConn: 2})
			other := newSession(t, opts.Table, mysqlstore.SessionOptions{})
			c := ctxT(t)
			for _, k := range []string{"a", "b", "c", "d"} {
				if _, err := s.Acquire(c, k, "t"+k, time.Second); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Acquire(c, "e", "te", time.Second)
			refused := maxConns == 2
			if got := errors.Is(err, mysqlstore.ErrConnLimit) && errors.Is(err, driver.ErrUnavailable); got != refused || (err != nil) != refused {
				t.Fatalf("fifth key: %v; refused for capacity (ErrConnLimit, ErrUnavailable): %v, want %v", err, got, refused)
			}
			if n, want := len(s.ConnIDs()), map[bool]int{true: 2, false: 3}[refused]; n != want {
				t.Fatalf("%d connections pinned after the fifth key, want %d", n, want)
			}
			_, err = other.Acquire(c, "e", "x", time.Second)
			if refused && err != nil {
				t.Fatalf("the refused key is not free: another client got %v", err)
			}
			if !refused && !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("control: the fifth key taken, yet another client got %v", err)
			}
			for _, k := range []string{"a", "b", "c", "d"} {
				if _, err := s.Extend(c, k, "t"+k, time.Second); err != nil {
					t.Fatalf("key %s after the fifth Acquire: %v", k, err)
				}
			}
			if !refused {
				return
			}
			// A queued wait at the limit: refused the same way, at once.
			_, err = s.AcquireQueued(c, "e", "te", time.Second)
			if !errors.Is(err, mysqlstore.ErrConnLimit) || !errors.Is(err, driver.ErrUnavailable) {
				t.Fatalf("queued wait at the limit: %v; want ErrConnLimit matching ErrUnavailable", err)
			}
			if n := len(s.ConnIDs()); n != 2 {
				t.Fatalf("%d connections pinned after the queued wait, want 2", n)
			}
		})
	}
}

// TestSessionPoolExhausted: when the application holds every connection of
// the pool, Acquire fails after ConnWait with ErrPoolExhausted, matching
// driver.ErrUnavailable, as pgstore's does (never a hang until ctx ends),
// pinning nothing. Control: once the application gives one back, the same
// Acquire succeeds.
func TestSessionPoolExhausted(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	db := openDB(t, shared(t).DSN())
	db.SetMaxOpenConns(2)
	s, err := mysqlstore.NewSession(db, mysqlstore.SessionOptions{Table: opts.Table, MaxConns: 1, ConnWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var conns []*sql.Conn
	for range 2 {
		c, err := db.Conn(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	start := time.Now()
	_, err = s.Acquire(ctxT(t), "k", "t", time.Second)
	if el := time.Since(start); !errors.Is(err, mysqlstore.ErrPoolExhausted) || !errors.Is(err, driver.ErrUnavailable) || el > 5*time.Second {
		t.Fatalf("Acquire on an exhausted pool: %v after %v; want ErrPoolExhausted after about 200ms", err, el)
	}
	if n := len(s.ConnIDs()); n != 0 {
		t.Fatalf("%d connections pinned after the refusal", n)
	}
	conns[0].Close()
	if _, err := s.Acquire(ctxT(t), "k", "t", time.Second); err != nil {
		t.Fatalf("control: Acquire once the pool has room: %v", err)
	}
	conns[1].Close()
}
