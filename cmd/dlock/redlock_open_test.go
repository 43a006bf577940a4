package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
)

func TestOpenRedlockLocksOnThreeServers(t *testing.T) {
	servers := redisserver.StartN(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.URL())
	}
	o, err := openRedlock(urls, "clitest:")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := o.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	c, err := dlock.New(o.Store, dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.TryLock(ctx, "job")
	if err != nil {
		t.Fatalf("TryLock via --redlock store: %v", err)
	}
	if _, err := c.TryLock(ctx, "job"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second TryLock = %v, want ErrNotAcquired", err)
	}
	// The lock is on every node, under the prefix. TryLock returns once a
	// majority granted, so the last node's grant may land a moment later.
	for i, s := range servers {
		deadline := time.Now().Add(2 * time.Second)
		for {
			n, err := s.Do("EXISTS", "clitest:{job}")
			if err == nil && n == "1" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("node %d: EXISTS = %q, %v; want 1 within 2 s", i, n, err)
				break
			}
			time.Sleep(5 * time.Millisecond) // polling interval
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRedlockRejectsBadURLs(t *testing.T) {
	for _, urls := range [][]string{{"redis://127.0.0.1:1", "not a url"}, {""}, {"redis://127.0.0.1:1", " "}} {
		_, err := openRedlock(urls, "")
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != ExitUsage {
			t.Errorf("openRedlock(%q) = %v, want a usage error", urls, err)
		}
	}
}

func TestStatusOverRedlockShowsTheMajoritysHolder(t *testing.T) {
	servers := redisserver.StartN(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.URL())
	}
	o, err := openRedlock(urls, "dlock:")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	c, err := dlock.New(o.Store, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	l, err := c.TryLock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	r := runDlock(t, nil, "status", "--json", "--redlock", strings.Join(urls, ","), "report")
	var st lockStatus
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("status --redlock: %s", r)
	}
	if !st.Held || st.Holds != 1 || st.Fence != l.Fence() || st.Holder != l.Token()[:6]+"…" || st.TTLms < 50_000 {
		t.Fatalf("status --redlock = %+v, want the lease's holder and fence %d", st, l.Fence())
	}
}
