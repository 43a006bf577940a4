package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/pgbouncer"
	"example.com/dlock/pgstore"
)

// TestFaultBouncerKilled: PgBouncer killed (-9) and restarted while locks
// are held through it.
//
// The lease table (through transaction pooling) keeps its holding in the
// database: once the pool has new connections its holder extends it with
// the same fence, another owner is refused, and the next holding's fence is
// greater. The session lock (through session pooling) dies with the
// bouncer's server connection: PostgreSQL frees it at once, another client
// takes the key with a greater fence, and the first holder's Extend says
// ErrNotHeld. The control: the first holder's pool works again after the
// restart (a ping), so its ErrNotHeld is the lock's loss, not a dead pool.
func TestFaultBouncerKilled(t *testing.T) {
	tb, sb := bouncer(t, pgbouncer.Transaction), bouncer(t, pgbouncer.Session)
	lpool := bouncedPool(t, tb, 4)
	lease := newStore(t, lpool, pgstore.Options{SweepInterval: -1})
	leaseOther := newStore(t, bouncedPool(t, tb, 4), pgstore.Options{Table: lease.Table(), SweepInterval: -1})
	sessMigrate(t, bouncedPool(t, sb, 2))
	sessPl := bouncedPool(t, sb, 4)
	sess := newSession(t, sessPl, pgstore.SessionOptions{})
	sessOther := newSession(t, bouncedPool(t, sb, 4), pgstore.SessionOptions{})
	lkey, skey := t.Name()+"/lease", t.Name()+"/session"
	lg, err := lease.Acquire(ctx(t), lkey, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := sess.Acquire(ctx(t), skey, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	for _, b := range []*pgbouncer.Bouncer{tb, sb} {
		b.Kill()
		if err := b.Restart(); err != nil {
			t.Fatal(err)
		}
	}

	// Lease: the holding survived in the database.
	var e driver.Grant
	if !faulttest.Within(20*time.Second, func() bool { e, err = lease.Extend(ctx(t), lkey, "a", time.Minute); return err == nil }) {
		t.Fatalf("lease holder's Extend after the bouncer's restart: %v", err)
	}
	if e.Fence != lg.Fence {
		t.Fatalf("fence after the restart %d, want %d", e.Fence, lg.Fence)
	}
	var lerr error
	if !faulttest.Within(20*time.Second, func() bool {
		_, lerr = leaseOther.Acquire(ctx(t), lkey, "b", time.Minute)
		return lerr != nil && errors.Is(lerr, driver.ErrNotAcquired)
	}) {
		t.Fatalf("another owner after the restart: %v; want contended (two owners)", lerr)
	}
	if err := lease.Release(ctx(t), lkey, "a"); err != nil {
		t.Fatal(err)
	}
	if g, err := leaseOther.Acquire(ctx(t), lkey, "b", time.Minute); err != nil || g.Fence <= lg.Fence {
		t.Fatalf("next lease holding: %+v, %v; want a fence above %d", g, err, lg.Fence)
	}

	// Session: the holding died with the bouncer's server connection.
	var g2 driver.Grant
	if !faulttest.Within(20*time.Second, func() bool { g2, err = sessOther.Acquire(ctx(t), skey, "b", time.Minute); return err == nil }) {
		t.Fatalf("session key after the bouncer's restart: %v; want free", err)
	}
	if g2.Fence <= sg.Fence {
		t.Fatalf("session fence after the restart %d, want above %d", g2.Fence, sg.Fence)
	}
	if _, err := sess.Extend(ctx(t), skey, "a", time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("the killed bouncer's session holder: Extend = %v while another store holds the key; want ErrNotHeld", err)
	}
	if err := sessPl.Ping(ctx(t)); err != nil {
		t.Fatalf("control: a ping after the restart failed (%v), so the control shows nothing", err)
	}
}
