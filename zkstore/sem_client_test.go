package zkstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// TestSemaphoresOnZooKeeper: the user API (dlock.Semaphores) on two
// stores, limit 2: one takes both permits, the other's TryAcquire is
// refused, and its Acquire gets a permit once they are released; the
// permit is renewed (ExtendPermits) while held.
func TestSemaphoresOnZooKeeper(t *testing.T) {
	root := uniq(t)
	a, err := dlock.NewSemaphores(dial(t, root, sessionTimeout, server(t).Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	b, err := dlock.NewSemaphores(dial(t, root, sessionTimeout, server(t).Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, time.Minute)
	p, err := a.Acquire(ctx, "s", 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "s", 2, 1); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with both permits out: %v, want ErrNotAcquired", err)
	}
	got := make(chan error, 1)
	go func() {
		q, err := b.Acquire(ctx, "s", 2, 1)
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	if err := p.Extend(ctx, sessionTimeout); err != nil {
		t.Fatalf("Extend of a held permit: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire once the permits came back: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Acquire did not get a permit within 15 s of the release")
	}
}

// TestFamilyNamesRefused: a semaphore name with a part after the first
// named "locks" or "leases" (a directory of the semaphore before it) and a
// read-write lock name with a part after the first named like a read-write
// lock node are refused with ErrInvalid, with no request sent.
func TestFamilyNamesRefused(t *testing.T) {
	s := dial(t, uniq(t), sessionTimeout, server(t).Addrs()...)
	ctx := ctxT(t, 10*time.Second)
	before := zkstore.Requests(s)
	for _, k := range []string{"a/locks", "a/leases", "a/b/leases/c"} {
		if _, err := s.AcquirePermits(ctx, k, tok(), 2, 1, time.Minute); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("AcquirePermits(%q) = %v, want ErrInvalid", k, err)
		}
		if err := s.ReleasePermits(ctx, k, tok()); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ReleasePermits(%q) = %v, want ErrInvalid", k, err)
		}
	}
	for _, k := range []string{"a/_c_x-__READ__0000000001", "a/__WRIT__0000000007/b"} {
		if _, err := s.AcquireRead(ctx, k, tok(), time.Minute); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("AcquireRead(%q) = %v, want ErrInvalid", k, err)
		}
		if err := s.ReleaseRW(ctx, k, tok()); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ReleaseRW(%q) = %v, want ErrInvalid", k, err)
		}
	}
	if n := zkstore.Requests(s) - before; n != 0 {
		t.Errorf("%d requests sent for refused names", n)
	}
	// Control: the same names are fine as the other primitive's, and a
	// plain nested name is fine for both.
	if _, err := s.AcquireRead(ctx, "a/locks", tok(), time.Minute); err != nil {
		t.Errorf("AcquireRead(a/locks): %v", err)
	}
	if _, err := s.AcquirePermits(ctx, "a/b", tok(), 2, 1, time.Minute); err != nil {
		t.Errorf("AcquirePermits(a/b): %v", err)
	}
}

// TestSemaphoreWaitsForTheMutexOnlyWithRoom: while another acquirer holds
// the semaphore's mutex (a lock node made by hand), an acquisition whose
// permits are free waits for it and then gets them; one whose permits are
// all out is refused at once.
func TestSemaphoreWaitsForTheMutexOnlyWithRoom(t *testing.T) {
	s := dial(t, uniq(t), sessionTimeout, server(t).Addrs()...)
	ctx := ctxT(t, 30*time.Second)
	adm := admin(t)
	holder := tok()
	if _, err := s.AcquirePermits(ctx, "m", holder, 2, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	locks := s.SemRoot() + "/m/locks"
	other, err := adm.Create(locks+"/_c_00000000-0000-4000-8000-000000000000-lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := s.AcquirePermits(ctx, "m", tok(), 2, 1, time.Minute)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("an acquisition with a permit free returned while another held the mutex: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := adm.Delete(other, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the acquisition once the mutex was free: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the acquisition did not finish within 10 s of the mutex's release")
	}
	if _, err := adm.Create(locks+"/_c_00000000-0000-4000-8000-000000000001-lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var pe *driver.PermitsTakenError
	if _, err := s.AcquirePermits(ctx, "m", tok(), 2, 1, time.Minute); !errors.As(err, &pe) || pe.Used != 2 || time.Since(start) > 2*time.Second {
		t.Fatalf("an acquisition with both permits out and the mutex taken: %v after %v, want refused at once with 2 out", err, time.Since(start))
	}
}
