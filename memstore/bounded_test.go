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
