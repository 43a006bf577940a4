package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
)

func TestOpenRedlockLocksOnThreeServers(t *testing.T) {
	servers, urls := startRedlockServers(t)
	o, err := openRedlock(urls, "clitest:")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := o.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	c, err := dlock.New(o.Store.(driver.Mutex), dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
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
	_, urls, c := redlockClient(t)
	ctx := t.Context()
	l, err := c.TryLock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	r := runDlock(t, nil, "status", "--json", "--redlock", urls, "report")
	var st lockStatus
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("status --redlock: %s", r)
	}
	if !st.Held || st.Holds != 1 || st.Fence < l.Fence() || st.Holder != l.Token()[:6] || st.ttl() < 50_000 {
		t.Fatalf("status --redlock = %+v, want the lease's holder and fence %d", st, l.Fence())
	}
}

// list over Redlock scans every node and shows each lock held by a majority
// once, with the majority's holder; a stray key on one node alone is not
// shown as held.
func TestListOverRedlockShowsMajorityHeldLocks(t *testing.T) {
	servers, urls, c := redlockClient(t)
	ctx := t.Context()
	var leases []*dlock.Lease
	for _, key := range []string{"orders:1", "orders:2", "users:1"} {
		l, err := c.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background())
		leases = append(leases, l)
	}
	// A lock on one node only ("<holds>:<fence>:<call id>:<owner>",
	// redisstore's layout): a minority, so not held.
	if _, err := servers[0].Do("SET", "dlock:{orders:9}", "1:1:c:stray", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	r := runDlock(t, nil, "list", "--json", "--redlock", urls, "orders:*")
	var rows []lockStatus
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil {
		t.Fatalf("list --redlock: %s", r)
	}
	if len(rows) != 2 || rows[0].Key != "orders:1" || rows[1].Key != "orders:2" {
		t.Fatalf("list --redlock orders:* = %+v, want orders:1 and orders:2 once each", rows)
	}
	for i, row := range rows {
		// The fence shown is the last any node issued: at least the lease's
		// (a node that granted after the majority decided has a later one).
		if !row.Held || row.Fence < leases[i].Fence() || row.Holder != leases[i].Token()[:6] {
			t.Errorf("row %+v, want the lease's holder and fence >= %d", row, leases[i].Fence())
		}
	}
	// With one node of three down the others still make a majority.
	servers[2].Stop()
	r = runDlock(t, nil, "list", "--json", "--redlock", urls, "orders:*")
	rows = nil
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) != 2 {
		t.Fatalf("list --redlock with a node down: %s", r)
	}
	servers[1].Stop()
	if r = runDlock(t, nil, "list", "--redlock", urls, "orders:*"); r.code != ExitUnavailable {
		t.Fatalf("list --redlock with two nodes of three down: %s, want exit %d", r, ExitUnavailable)
	}
}

// openRedlock opens a Redlock store over urls the way --redlock does.
func openRedlock(urls []string, prefix string) (*openedStore, error) {
	f := storeFlags{redlockURLs: urls, prefix: prefix}
	return f.open(context.Background())
}

// startRedlockServers starts three servers, stopped at the end of the test,
// and returns them with their URLs.
func startRedlockServers(t *testing.T) ([]*redisserver.Server, []string) {
	t.Helper()
	servers := redisserver.StartN(t, 3)
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return servers, urls
}

// redlockClient starts three servers and returns them, their URLs as the
// --redlock flag takes them, and a Client over a Redlock store opened on
// them the way the CLI opens it (prefix dlock:, one-minute leases).
func redlockClient(t *testing.T) ([]*redisserver.Server, string, *dlock.Client) {
	t.Helper()
	servers, urls := startRedlockServers(t)
	o, err := openRedlock(urls, "dlock:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	c, err := dlock.New(o.Store.(driver.Mutex), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	return servers, strings.Join(urls, ","), c
}
