package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/overlap"
	"example.com/dlock/internal/pgbouncer"
	"example.com/dlock/pgstore"
)

// bouncedSession returns a dlock Client on a SessionStore of its own pool
// through b (MaxConns conns pinned at most), with opts applied to the store.
func bouncedSession(t *testing.T, b *pgbouncer.Bouncer, maxConns int, opts ...func(*pgstore.SessionStore)) *dlock.Client {
	t.Helper()
	s := newSession(t, bouncedPool(t, b, int32(maxConns+2)), pgstore.SessionOptions{MaxConns: maxConns})
	for _, o := range opts {
		o(s)
	}
	c, err := dlock.New(s, dlock.WithWait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// holdAndTry has a hold "hot" and b try it tries times (TryLock, no wait)
// while a holds it, and returns the recorder of their windows and b's
// errors.
func holdAndTry(t *testing.T, a, b *dlock.Client, tries int) (*overlap.Recorder, []error, error) {
	t.Helper()
	rec := &overlap.Recorder{}
	l, err := a.Lock(ctx(t), "hot")
	if err != nil {
		return rec, nil, err
	}
	from := time.Now()
	var errs []error
	for range tries {
		bl, err := b.TryLock(ctx(t), "hot")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got := time.Now()
		_ = bl.Release(ctx(t))
		rec.Add(overlap.Window{Who: "b", From: got, To: time.Now(), Fence: bl.Fence()})
	}
	rec.Add(overlap.Window{Who: "a", From: from, To: time.Now().Add(2 * time.Millisecond), Fence: l.Fence()})
	_ = l.Release(ctx(t))
	return rec, errs, nil
}

// TestBouncerSessionLock: session locks (pg_advisory_lock) through
// PgBouncer in transaction mode never give two holders. Through that mode
// an advisory lock stays on a server backend that PgBouncer lends to the
// next client, and pg_try_advisory_lock on the same backend is a re-entry
// that succeeds: measured here by the control, where another Client gets
// the key while the first holds it.
//
//   - FirstUse: a store's first pin sees the pooler (two client connections
//     sharing or swapping backends) and every Lock fails with
//     ErrSharedSession (matching ErrRefused); ten fresh stores, ten
//     refusals.
//   - GuardOnly: with that check off, the lock statement's own guard (its
//     backend already holds the lock) refuses the second Client: no
//     overlap.
//   - NoGuardControl: with both off, the second Client's TryLock succeeds
//     while the first holds the key: overlaps (the guard is what prevents
//     them).
func TestBouncerSessionLock(t *testing.T) {
	b := bouncer(t, pgbouncer.Transaction)
	sessMigrate(t, bouncedPool(t, b, 2))
	t.Run("FirstUse", func(t *testing.T) {
		for i := range 10 {
			_, err := bouncedSession(t, b, 2).Lock(ctx(t), "hot")
			if !errors.Is(err, pgstore.ErrSharedSession) || !errors.Is(err, dlock.ErrRefused) {
				t.Fatalf("store %d: Lock through transaction pooling = %v; want ErrSharedSession (ErrRefused)", i, err)
			}
			if i == 0 {
				t.Logf("Lock: %v", err)
			}
		}
	})
	t.Run("GuardOnly", func(t *testing.T) {
		a := bouncedSession(t, b, 2, pgstore.WithoutSharedCheck)
		c := bouncedSession(t, b, 2, pgstore.WithoutSharedCheck)
		rec, errs, err := holdAndTry(t, a, c, 20)
		if err != nil {
			t.Fatal(err)
		}
		shared := 0
		for _, err := range errs {
			if errors.Is(err, pgstore.ErrSharedSession) {
				shared++
			}
		}
		t.Logf("second Client: %d of 20 tries failed, %d with ErrSharedSession; overlaps %v", len(errs), shared, rec.Overlaps())
		if o := rec.Overlaps(); len(o) != 0 || len(errs) != 20 {
			t.Fatalf("two holders through transaction pooling with the guard on: %v", o)
		}
	})
	t.Run("NoGuardControl", func(t *testing.T) {
		off := []func(*pgstore.SessionStore){pgstore.WithoutSharedCheck, pgstore.WithoutSharedGuard}
		a, c := bouncedSession(t, b, 2, off...), bouncedSession(t, b, 2, off...)
		rec, errs, err := holdAndTry(t, a, c, 20)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("without the guard: %d overlaps, %d failed tries", len(rec.Overlaps()), len(errs))
		if len(rec.Overlaps()) == 0 {
			t.Fatal("without the guard the second Client never got the key while the first held it: the test cannot tell the guard from no guard")
		}
	})
}

// TestBouncerSessionMode: through PgBouncer in session mode (a client
// keeps its server backend) session locks work: 2 Clients × 4 goroutines ×
// 10 rounds on one key, every Lock succeeds (the first-use check does not
// see a pooler that shares sessions) and no two critical sections overlap.
func TestBouncerSessionMode(t *testing.T) {
	b := bouncer(t, pgbouncer.Session)
	sessMigrate(t, bouncedPool(t, b, 2))
	const clients, goroutines, rounds = 2, 4, 10
	cs := make([]*dlock.Client, clients)
	for i := range cs {
		cs[i] = bouncedSession(t, b, goroutines)
	}
	rec := hotSections(t, cs, goroutines, rounds, 2*time.Millisecond)
	if n, o := len(rec.Windows()), rec.Overlaps(); n != clients*goroutines*rounds || len(o) != 0 {
		t.Fatalf("%d critical sections (want %d), errors %v, overlaps %v", n, clients*goroutines*rounds, rec.Errs(), o)
	}
}
