package mysqlstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestLeaseBasics walks one key through acquire, re-entry, contention,
// extend and release, checking each answer.
func TestLeaseBasics(t *testing.T) {
	s := newStore(t, mysqlstore.Options{})
	c := ctxT(t)
	g, err := s.Acquire(c, "k", "a", time.Minute)
	if err != nil || g.Holds != 1 || g.Fence == 0 {
		t.Fatalf("acquire: %+v %v", g, err)
	}
	g2, err := s.Acquire(c, "k", "a", time.Second)
	if err != nil || g2.Holds != 2 || g2.Fence != g.Fence {
		t.Fatalf("re-entry: %+v %v", g2, err)
	}
	_, err = s.Acquire(c, "k", "b", time.Minute)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || ce.Remaining < 50*time.Second || ce.Remaining > time.Minute {
		t.Fatalf("contended: %v", err)
	}
	if _, err := s.Extend(c, "k", "b", time.Minute); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("extend by another: %v", err)
	}
	if _, err := s.Extend(c, "nokey", "b", time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("extend of a missing key: %v", err)
	}
	if e, err := s.Extend(c, "k", "a", time.Minute); err != nil || e.Fence != g.Fence || e.Holds != 2 {
		t.Fatalf("extend: %+v %v", e, err)
	}
	if err := s.Release(c, "k", "b"); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("release by another: %v", err)
	}
	for i := range 2 {
		if err := s.Release(c, "k", "a"); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if err := s.Release(c, "k", "a"); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("release of a free key: %v", err)
	}
	g3, err := s.Acquire(c, "k", "b", time.Minute)
	if err != nil || g3.Fence <= g.Fence {
		t.Fatalf("next holder: %+v %v (previous fence %d)", g3, err, g.Fence)
	}
	if s.Deadlocks() != 0 {
		t.Fatalf("%d deadlocks", s.Deadlocks())
	}
}
