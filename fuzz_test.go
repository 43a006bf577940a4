package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// countingStore counts the calls that reach the store: input rejected by
// validation must never get there.
type countingStore struct {
	driver.Mutex
	calls atomic.Int64
}

// Unwrap lets the Client find the wrapped store's capabilities (notify,
// handoff, batched renewal) through the wrapper (driver.As).
func (s *countingStore) Unwrap() driver.Mutex { return s.Mutex }

func (s *countingStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.calls.Add(1)
	return s.Mutex.Acquire(ctx, key, token, ttl)
}

// FuzzValidateKey checks ValidateKey against its documented rule and that a
// rejected key never reaches the store, while an accepted one round-trips.
//
//	go test -run '^$' -fuzz FuzzValidateKey -fuzztime 30s .
func FuzzValidateKey(f *testing.F) {
	for _, k := range []string{"", "k", "}", "{x}", "a\x00b", "\xff", "é", "'; FLUSHALL --",
		strings.Repeat("a", dlock.MaxKeyLen), strings.Repeat("a", dlock.MaxKeyLen+1), strings.Repeat("é", 257)} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		valid := key != "" && len(key) <= dlock.MaxKeyLen && utf8.ValidString(key)
		err := dlock.ValidateKey(key)
		if (err == nil) != valid || (err != nil && !errors.Is(err, dlock.ErrInvalid)) {
			t.Fatalf("ValidateKey(%q) = %v, want valid=%v", key, err, valid)
		}
		store := &countingStore{Mutex: memstore.New(nil)}
		c, err := dlock.New(store, dlock.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		l, err := c.TryLock(ctx, key)
		if !valid {
			if !errors.Is(err, dlock.ErrInvalid) || store.calls.Load() != 0 {
				t.Fatalf("TryLock(%q): %v after %d store calls", key, err, store.calls.Load())
			}
			return
		}
		if err != nil || l.Key() != key {
			t.Fatalf("TryLock(%q): %v", key, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzOptions checks that out-of-range TTLs and waits are rejected with
// ErrInvalid, by New and per call, before any store call.
//
//	go test -run '^$' -fuzz FuzzOptions -fuzztime 30s .
func FuzzOptions(f *testing.F) {
	for _, s := range []struct {
		ttl, wait int64
		renew     bool
	}{{0, 0, false}, {-1, 0, true}, {int64(dlock.MinTTL) - 1, 0, false}, {int64(dlock.MinTTL), 0, true},
		{int64(dlock.MaxTTL), 1, false}, {int64(dlock.MaxTTL) + 1, 0, true}, {int64(time.Second), -1, false}, {1 << 62, 1 << 62, true}} {
		f.Add(s.ttl, s.wait, s.renew)
	}
	f.Fuzz(func(t *testing.T, ttl, wait int64, renew bool) {
		opt := dlock.WithTTL(time.Duration(ttl))
		if renew {
			opt = dlock.WithAutoRenew(time.Duration(ttl))
		}
		opts := []dlock.Option{opt, dlock.WithWait(time.Duration(wait))}
		valid := time.Duration(ttl) >= dlock.MinTTL && time.Duration(ttl) <= dlock.MaxTTL && wait >= 0
		store := &countingStore{Mutex: memstore.New(nil)}
		if _, err := dlock.New(store, opts...); (err == nil) != valid || (err != nil && !errors.Is(err, dlock.ErrInvalid)) {
			t.Fatalf("New(ttl=%d, wait=%d, renew=%v) = %v, want valid=%v", ttl, wait, renew, err, valid)
		}
		c, err := dlock.New(store)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		l, err := c.TryLock(ctx, "k", opts...)
		if !valid {
			if !errors.Is(err, dlock.ErrInvalid) || store.calls.Load() != 0 {
				t.Fatalf("TryLock(ttl=%d, wait=%d): %v after %d store calls", ttl, wait, err, store.calls.Load())
			}
			return
		}
		if err != nil {
			// A lease of a few ms may have no validity left by the time the
			// grant is back under fuzzing load: then it is discarded.
			if errors.Is(err, dlock.ErrNotAcquired) && time.Duration(ttl) < 100*time.Millisecond {
				return
			}
			t.Fatalf("TryLock(ttl=%d, wait=%d): %v", ttl, wait, err)
		}
		_ = l.Release(ctx)
	})
}
