package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
)

// listen opens a connection of its own that LISTENs on table's channel,
// closed when the test ends.
func listen(t *testing.T, table string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx(t), server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx(t)) })
	if _, err := c.Exec(ctx(t), `LISTEN "`+table+`_locks"`); err != nil {
		t.Fatal(err)
	}
	return c
}

// firstNotified takes nrm uncontended holdings of "quiet" (acquire,
// release), then a holding of "waited" that a contended Acquire met, and
// returns the payload of the first notification on the channel.
// Notifications arrive in commit order, so the answer needs no timing: it
// is "waited" if the uncontended releases sent nothing.
func firstNotified(t *testing.T, s *pgstore.Store, conn *pgx.Conn, n int) string {
	t.Helper()
	for range n {
		tk := tok()
		if _, err := s.Acquire(ctx(t), "quiet", tk, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx(t), "quiet", tk); err != nil {
			t.Fatal(err)
		}
	}
	tk := tok()
	if _, err := s.Acquire(ctx(t), "waited", tk, time.Minute); err != nil {
		t.Fatal(err)
	}
	var ce *driver.ContendedError
	if _, err := s.Acquire(ctx(t), "waited", tok(), time.Minute); !errors.As(err, &ce) {
		t.Fatalf("second owner's Acquire = %v; want ContendedError", err)
	}
	if err := s.Release(ctx(t), "waited", tk); err != nil {
		t.Fatal(err)
	}
	note, err := releaseNote(ctx(t), conn)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return note.Payload
}

// TestReleaseNotifiesOnlyWhenWaited: releases of holdings nobody waited for
// send no NOTIFY (their commit skips the notification queue), and the
// release of a holding a contended Acquire met does send one. Control:
// with NOTIFY on every release (the statement before the waited column),
// the first notification is an uncontended release's.
func TestReleaseNotifiesOnlyWhenWaited(t *testing.T) {
	s := newStore(t, newPool(t), pgstore.Options{})
	if got := firstNotified(t, s, listen(t, s.Table()), 20); got != "waited" {
		t.Fatalf("first notification for %q; want \"waited\" (an uncontended release sent NOTIFY)", got)
	}
	t.Run("NotifyAlwaysControl", func(t *testing.T) {
		s := newStore(t, newPool(t), pgstore.Options{})
		pgstore.WithNotifyAlways(s)
		if got := firstNotified(t, s, listen(t, s.Table()), 20); got != "quiet" {
			t.Fatalf("first notification for %q with NOTIFY on every release; want \"quiet\"", got)
		}
	})
}

// TestSubscribeMarksTheHolding: a Subscribe made while another owner holds
// the key (no contended Acquire) marks the holding, so that its release
// wakes the subscriber; a re-entry, a partial release and a transfer keep
// the mark. Control: the first notification on the channel is for this
// key, after a number of uncontended releases of another key.
func TestSubscribeMarksTheHolding(t *testing.T) {
	s := newStore(t, newPool(t), pgstore.Options{})
	conn := listen(t, s.Table())
	for range 5 {
		tk := tok()
		if _, err := s.Acquire(ctx(t), "quiet", tk, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx(t), "quiet", tk); err != nil {
			t.Fatal(err)
		}
	}
	a, b := tok(), tok()
	if _, err := s.Acquire(ctx(t), "k", a, time.Minute); err != nil {
		t.Fatal(err)
	}
	ch, cancel, err := s.Subscribe(ctx(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if _, err := s.Acquire(ctx(t), "k", a, time.Minute); err != nil { // re-entry
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), "k", a); err != nil { // one of two holds
		t.Fatal(err)
	}
	if _, err := s.Transfer(ctx(t), "k", a, b, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), "k", b); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithTimeout(ctx(t), 10*time.Second)
	defer stop()
	note, err := releaseNote(wctx, conn)
	if err != nil || note.Payload != "k" {
		t.Fatalf("first notification %v (%v); want one for \"k\"", note, err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber was not woken within 10s of the release")
	}
}

// TestMigrateAddsWaitedColumn: a lease table made by the first schema
// (without waited) is refused with a hint to migrate (ErrRefused), and
// Migrate adds the column, keeping the rows; the store then locks on it.
func TestMigrateAddsWaitedColumn(t *testing.T) {
	pool := newPool(t)
	opts := pgstore.Options{Table: "old_" + tok()[:8]}
	_, err := pool.Exec(ctx(t), `CREATE TABLE `+opts.Table+`_locks (name text PRIMARY KEY, owner text NOT NULL,
  holds integer NOT NULL CHECK (holds > 0), fence bigint NOT NULL CHECK (fence > 0), expires_at timestamptz NOT NULL);
CREATE SEQUENCE `+opts.Table+`_fence AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE `+opts.Table+`_rows (name text PRIMARY KEY);
INSERT INTO `+opts.Table+`_locks VALUES ('held', 'someone', 1, 1, now() + interval '1 hour')`)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(pool, pgstore.Options{Table: opts.Table, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx(t)) }()
	if _, err := s.Acquire(ctx(t), "k", tok(), time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("Acquire on the old table = %v; want ErrRefused", err)
	}
	for range 2 {
		if err := pgstore.Migrate(ctx(t), pool, opts); err != nil {
			t.Fatalf("Migrate on the old table: %v", err)
		}
	}
	var ce *driver.ContendedError
	if _, err := s.Acquire(ctx(t), "held", tok(), time.Minute); !errors.As(err, &ce) {
		t.Fatalf("Acquire of the old row after Migrate = %v; want ContendedError (the row kept)", err)
	}
	if _, err := s.Acquire(ctx(t), "k", tok(), time.Minute); err != nil {
		t.Fatalf("Acquire after Migrate: %v", err)
	}
}
