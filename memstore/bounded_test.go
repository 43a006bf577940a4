package memstore

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestL7ExpiredKeysDoNotPileUp: 10,000 distinct keys, each locked once and
// left to expire, under a fake clock that moves 2 s (past every lease) per
// 100 keys: the store keeps state for about the keys still held, not for
// every key ever locked (issue 13, L7; it kept a fence per key and every
// unvisited expired entry before).
func TestL7ExpiredKeysDoNotPileUp(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New(func() time.Time { return now })
	ctx := context.Background()
	for i := range 10_000 {
		if _, err := s.Acquire(ctx, "order:"+strconv.Itoa(i), "t", time.Second); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			now = now.Add(2 * time.Second)
		}
	}
	s.mu.Lock()
	n := len(s.locks)
	s.mu.Unlock()
	if n > 300 {
		t.Fatalf("%d entries kept for 10,000 keys locked once and expired, want at most 300", n)
	}
	t.Logf("%d entries kept after 10,000 keys", n)
}

// TestRWExpiredKeysDoNotPileUp: the same for read-write locks: 10,000
// distinct keys, each read once (and every tenth also left with a writer's
// mark) and left to expire, keep state for about the keys still held.
func TestRWExpiredKeysDoNotPileUp(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New(func() time.Time { return now })
	ctx := context.Background()
	for i := range 10_000 {
		key := "doc:" + strconv.Itoa(i)
		if _, err := s.AcquireRead(ctx, key, "r", time.Second); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := s.AcquireWrite(ctx, key, "w", time.Second); err == nil {
				t.Fatal("AcquireWrite with a reader succeeded")
			}
		}
		if i%100 == 99 {
			now = now.Add(3 * time.Second) // past every lease and mark
		}
	}
	s.mu.Lock()
	n := len(s.rw.keys)
	s.mu.Unlock()
	if n > 300 {
		t.Fatalf("%d entries kept for 10,000 keys read once and expired, want at most 300", n)
	}
	t.Logf("%d entries kept after 10,000 keys", n)
}
