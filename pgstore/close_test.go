package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// TestCloseDoc pins what the two stores' Close comments promise. The lease
// table: Acquire, Extend, Release, Transfer and Subscribe fail with
// ErrInvalid; Inspect and List still read through the pool, and the row of
// a key held at Close stays held. The session store: the calls on holdings
// fail with ErrInvalid, KeepAlive too (driver.SessionKeeper), Inspect still
// reads, and the key held at Close is free. The control for each is the same
// Acquire before Close, which succeeds.
func TestCloseDoc(t *testing.T) {
	pool := newPool(t)
	t.Run("Store", func(t *testing.T) {
		s := newStore(t, pool, pgstore.Options{})
		a := tok()
		if _, err := s.Acquire(ctx(t), "k", a, time.Minute); err != nil { // control
			t.Fatal(err)
		}
		if err := s.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
		_, acq := s.Acquire(ctx(t), "k2", tok(), time.Minute)
		_, ext := s.Extend(ctx(t), "k", a, time.Minute)
		_, tra := s.Transfer(ctx(t), "k", a, tok(), time.Minute)
		_, _, sub := s.Subscribe(ctx(t), "k")
		for name, err := range map[string]error{"Acquire": acq, "Extend": ext, "Release": s.Release(ctx(t), "k", a), "Transfer": tra, "Subscribe": sub} {
			if !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("%s after Close = %v, want ErrInvalid", name, err)
			}
		}
		if info, err := s.Inspect(ctx(t), "k"); err != nil || !info.Held {
			t.Errorf("Inspect after Close = %+v, %v; want the held row, read through the pool", info, err)
		}
		n := 0
		if err := s.List(ctx(t), "", func(string, driver.Info) bool { n++; return true }); err != nil || n != 1 {
			t.Errorf("List after Close: %d keys, %v; want 1 and nil", n, err)
		}
	})
	t.Run("SessionStore", func(t *testing.T) {
		sessMigrate(t, pool)
		s := newSession(t, pool, pgstore.SessionOptions{MaxConns: 1})
		key, a := t.Name(), tok()
		if _, err := s.Acquire(ctx(t), key, a, time.Minute); err != nil { // control
			t.Fatal(err)
		}
		if err := s.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
		_, acq := s.Acquire(ctx(t), key+"2", tok(), time.Minute)
		_, que := s.AcquireQueued(ctx(t), key+"2", tok(), time.Minute)
		_, ext := s.Extend(ctx(t), key, a, time.Minute)
		res := s.ExtendBatch(ctx(t), []driver.ExtendRequest{{Key: key, Token: a, TTL: time.Minute}})
		for name, err := range map[string]error{"Acquire": acq, "AcquireQueued": que, "Extend": ext, "ExtendBatch": res[0].Err, "Release": s.Release(ctx(t), key, a)} {
			if !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("%s after Close = %v, want ErrInvalid", name, err)
			}
		}
		if err := s.KeepAlive(ctx(t)); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("KeepAlive after Close = %v, want ErrInvalid", err)
		}
		if info, err := s.Inspect(ctx(t), key); err != nil || info.Held {
			t.Errorf("Inspect after Close = %+v, %v; want the key free, read through the pool", info, err)
		}
	})
}

// TestInspectRefusesBadKeysBeforeIO pins Inspect's doc: an empty key or one
// with a NUL byte is ErrInvalid before any I/O (the pool is closed, so any
// I/O would fail otherwise, as the control with a valid key shows).
func TestInspectRefusesBadKeysBeforeIO(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool, pgstore.Options{})
	pool.Close()
	for _, key := range []string{"", "a\x00b"} {
		if _, err := s.Inspect(ctx(t), key); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("Inspect(%q) = %v, want ErrInvalid", key, err)
		}
	}
	if _, err := s.Inspect(ctx(t), "k"); err == nil || errors.Is(err, driver.ErrInvalid) {
		t.Errorf("control: Inspect on a closed pool = %v, want an I/O error", err)
	}
}
