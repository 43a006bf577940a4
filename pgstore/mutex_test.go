package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// TestBasics walks one key through acquire, contention, re-entry, extend
// and release, checking each answer.
func TestBasics(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool, pgstore.Options{})
	a, b := tok(), tok()
	g, err := s.Acquire(ctx(t), "k", a, time.Minute)
	if err != nil || g.Holds != 1 || g.Fence == 0 || g.TTL != time.Minute {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	_, err = s.Acquire(ctx(t), "k", b, time.Minute)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || ce.Remaining < 50*time.Second || ce.Remaining > time.Minute {
		t.Fatalf("contended Acquire = %v; want ContendedError with about a minute", err)
	}
	g2, err := s.Acquire(ctx(t), "k", a, time.Second)
	if err != nil || g2.Holds != 2 || g2.Fence != g.Fence {
		t.Fatalf("re-entry = %+v, %v", g2, err)
	}
	if _, err := s.Extend(ctx(t), "k", b, time.Minute); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("Extend by another = %v; want taken", err)
	}
	if err := s.Release(ctx(t), "k", b); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("Release by another = %v; want taken", err)
	}
	if g3, err := s.Extend(ctx(t), "k", a, 2*time.Minute); err != nil || g3.Fence != g.Fence || g3.Holds != 2 {
		t.Fatalf("Extend = %+v, %v", g3, err)
	}
	for i := range 2 {
		if err := s.Release(ctx(t), "k", a); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
	if err := s.Release(ctx(t), "k", a); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("third Release = %v; want expired", err)
	}
	if _, err := s.Extend(ctx(t), "k", a, time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("Extend after release = %v; want expired", err)
	}
	g4, err := s.Acquire(ctx(t), "k", b, time.Minute)
	if err != nil || g4.Fence <= g.Fence {
		t.Fatalf("Acquire after release = %+v, %v; want fence > %d", g4, err, g.Fence)
	}
}

// TestRejectsBeforeIO: a key with a NUL byte (PostgreSQL text cannot hold
// one) and a ttl under a millisecond are refused with ErrInvalid, and so is
// every call after Close; none reaches the server (the pool is closed).
func TestRejectsBeforeIO(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool, pgstore.Options{})
	pool.Close()
	if _, err := s.Acquire(ctx(t), "a\x00b", tok(), time.Second); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("NUL key: %v", err)
	}
	if _, err := s.Acquire(ctx(t), "k", tok(), time.Microsecond); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("1µs ttl: %v", err)
	}
	if _, _, err := s.Subscribe(ctx(t), "a\x00b"); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Subscribe NUL key: %v", err)
	}
	if _, err := s.Acquire(ctx(t), "k", tok(), time.Second); err == nil || errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Acquire on a closed pool = %v; want an I/O error (control: the checks above are not pool failures)", err)
	}
	if err := s.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), "k", tok()); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Release after Close: %v", err)
	}
}
