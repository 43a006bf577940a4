package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/pgstore"
)

// TestFaultDatabaseKilled: the database is killed (-9) and restarted.
//
// Lease store: the lease rows are on disk (WAL), so a holding survives
// the crash with its expiry on the database clock: nobody else gets the key
// before it ends, its holder extends it with the same fence once the server
// is back, and the next holding's fence is greater (the sequence never goes
// back after crash recovery).
//
// Session store: advisory locks live in the server's memory and die with
// it: the holder must report the holding lost (Extend: ErrNotHeld), never
// held, while another store takes the key with a greater fence. Negative
// control: a monitor that only checks that the database answers (a ping)
// reports the holder alive at that moment: two owners.
func TestFaultDatabaseKilled(t *testing.T) {
	srv := sessOwnServer(t)
	lease := leaseStore(t, sessPool(t, srv.URL(), 4))
	leaseOther := leaseStore(t, sessPool(t, srv.URL(), 4))
	sessPl := sessPool(t, srv.URL(), 4)
	sess := newSession(t, sessPl, pgstore.SessionOptions{})
	sessOther := newSession(t, sessPool(t, srv.URL(), 4), pgstore.SessionOptions{})
	lkey, skey := t.Name()+"/lease", t.Name()+"/session"
	lg, err := lease.Acquire(tctx(t), lkey, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := sess.Acquire(tctx(t), skey, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}

	// Lease: the holding survived; its holder extends it once the pool
	// has replaced its dead connections.
	var e driver.Grant
	if !faulttest.Within(20*time.Second, func() bool { e, err = lease.Extend(tctx(t), lkey, "a", time.Minute); return err == nil }) {
		t.Fatalf("lease holder's Extend after the restart: %v", err)
	}
	if e.Fence != lg.Fence {
		t.Fatalf("fence after the restart %d, want %d", e.Fence, lg.Fence)
	}
	var lerr error
	if !faulttest.Within(20*time.Second, func() bool {
		_, lerr = leaseOther.Acquire(tctx(t), lkey, "b", time.Minute)
		return lerr != nil && errors.Is(lerr, driver.ErrNotAcquired)
	}) {
		t.Fatalf("another owner after the restart: %v; want contended (two owners)", lerr)
	}
	if err := lease.Release(tctx(t), lkey, "a"); err != nil {
		t.Fatal(err)
	}
	if g, err := leaseOther.Acquire(tctx(t), lkey, "b", time.Minute); err != nil || g.Fence <= lg.Fence {
		t.Fatalf("next lease holding: %+v, %v; want a fence above %d", g, err, lg.Fence)
	}

	// Session: the holding died with the server.
	var g2 driver.Grant
	if !faulttest.Within(20*time.Second, func() bool { g2, err = sessOther.Acquire(tctx(t), skey, "b", time.Minute); return err == nil }) {
		t.Fatalf("session key after the restart: %v; want free", err)
	}
	if g2.Fence <= sg.Fence {
		t.Fatalf("session fence after the restart %d, want above %d", g2.Fence, sg.Fence)
	}
	if _, err := sess.Extend(tctx(t), skey, "a", time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("the crashed session's holder: Extend = %v while another store holds the key; want ErrNotHeld", err)
	}
	if err := sessPl.Ping(tctx(t)); err != nil {
		t.Fatalf("control: a ping after the restart failed (%v), so the control shows nothing", err)
	}
}
