package etcdstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestFamilyKeysAreNotMutexKeys: the keys of a semaphore and of a
// read-write lock live outside every Mutex key's prefix: List shows none
// of them, and the Mutex of the same name is free. Control: a held Mutex
// key is listed.
func TestFamilyKeysAreNotMutexKeys(t *testing.T) {
	c := node(t)
	s, _ := newStore(t, c, uniq(t), 5*time.Second)
	ctx := ctxT(t, 20*time.Second)
	for _, k := range []string{"a", "a/b"} {
		if _, err := s.AcquirePermits(ctx, k, tok(), 2, 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireRead(ctx, k, tok(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireWrite(ctx, k, tok(), time.Minute); !errors.Is(err, driver.ErrNotAcquired) { // a mark
			t.Fatal(err)
		}
	}
	if _, err := s.Acquire(ctx, "m", tok(), time.Minute); err != nil {
		t.Fatal(err)
	}
	var listed []string
	if err := s.List(ctx, "", func(key string, _ driver.Info) bool { listed = append(listed, key); return true }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0] != "m" {
		t.Fatalf("List = %q, want only the mutex key \"m\"", listed)
	}
	if _, err := s.Acquire(ctx, "a", tok(), time.Minute); err != nil {
		t.Fatalf("the Mutex \"a\" beside a semaphore and a read-write lock \"a\" and \"a/b\": %v, want it free", err)
	}
	if info, err := s.InspectPermits(ctx, "a"); err != nil || info.Used != 1 || len(info.Holders) != 1 {
		t.Fatalf("InspectPermits(\"a\") = %+v, %v: want its own holding only, not \"a/b\"'s", info, err)
	}
}
