package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
)

// TestRefusedConnectCheckHidesProbeKey: a user the store refuses at the
// connection check sees the store's reason, not the CLI's internal probe
// key nor the sentinel's "refused by the store" a second time.
func TestRefusedConnectCheckHidesProbeKey(t *testing.T) {
	srv := redisserver.Start(t)
	setUser(t, srv, "nop", "on", ">pw", "~*", "-@all", "+ping", "+hello", "+auth")
	r := runDlock(t, nil, "status", "--store", "redis://nop:pw@"+srv.Addr(), "k")
	if r.code != ExitRefused || !strings.Contains(r.stderr, "as user nop refused: the Redis user lacks a permission") ||
		strings.Contains(r.stderr, connectProbeKey) || strings.Count(r.stderr, "refused") != 1 {
		t.Errorf("want exit %d with the store's reason once, without %q: %v", ExitRefused, connectProbeKey, r)
	}
}

// TestNotALockSaidOnce: run and status on a key holding another program's
// value give the reason once (Redis' NOTALOCK reply repeated it).
func TestNotALockSaidOnce(t *testing.T) {
	srv := redisserver.Start(t)
	if _, err := srv.Do("SET", "dlock:{weird}", "hello"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "--store", srv.URL(), "--key", "weird", "--wait", "0", "--", "true"},
		{"status", "--store", srv.URL(), "weird"},
	} {
		r := runDlock(t, nil, args...)
		if r.code != ExitRefused || strings.Count(r.stderr, "not a dlock lock") != 1 || strings.Count(r.stderr, `"weird"`) != 1 {
			t.Errorf("%s: want exit %d saying once that the key is not a lock, naming it once: %v", args[0], ExitRefused, r)
		}
	}
}

// TestUnreachableStoreOneForm: Redis, etcd and ZooKeeper on a closed port
// are reported alike, "cannot reach SCHEME ADDRESS: …", with exit 69 within
// the connection check's 5 s bound (ZooKeeper took 10 s, and etcd said
// "store unavailable: etcdstore: …").
func TestUnreachableStoreOneForm(t *testing.T) {
	for _, scheme := range []string{"redis", "etcd", "zk"} {
		addr := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
		r := runDlock(t, nil, "status", "--store", scheme+"://"+addr, "k")
		if r.code != ExitUnavailable || !strings.HasPrefix(r.stderr, "dlock: cannot reach "+scheme+" "+addr) || strings.Contains(r.stderr, "store unavailable") {
			t.Errorf("%s: want exit %d and \"cannot reach %s %s\": %v", scheme, ExitUnavailable, scheme, addr, r)
		}
		if r.elapsed > connectTimeout+3*time.Second {
			t.Errorf("%s: reported after %v, want within %v (plus slack)", scheme, r.elapsed, connectTimeout)
		}
	}
}

// TestTwoStoresHintNamesTheRightFlag: the fix names the flag of the
// variable that selected the second store, not always --redis-cluster.
func TestTwoStoresHintNamesTheRightFlag(t *testing.T) {
	r := runDlock(t, []string{"DLOCK_REDIS=redis://127.0.0.1:1"}, "status", "--store", "redis://127.0.0.1:2", "k")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "unset DLOCK_REDIS or pass --redis ''") || strings.Contains(r.stderr, "redis-cluster") {
		t.Errorf("DLOCK_REDIS and --store: %v", r)
	}
	r = runDlock(t, nil, "status", "--store", "redis://127.0.0.1:2", "--redis", "redis://127.0.0.1:1", "k")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "pass only one of them") {
		t.Errorf("--store and --redis: %v", r)
	}
}

// TestListBadPatternIsUsageError: an unclosed class is exit 64 before the
// store is contacted (it said "no locks held"); the control, a closed
// class, reaches for the store (a closed port: 69).
func TestListBadPatternIsUsageError(t *testing.T) {
	closed := fmt.Sprintf("redis://127.0.0.1:%d", closedPort(t))
	for _, p := range []string{"[abc", `a\`, "x[^"} {
		if code, _, stderr := runCLI(t, "list", "--store", closed, p); code != ExitUsage || !strings.Contains(stderr, "bad PATTERN") {
			t.Errorf("list %q: code %d, stderr %q; want %d", p, code, stderr, ExitUsage)
		}
	}
	for _, p := range []string{"[abc]", "[]a]*", `a\[`, "*"} {
		if err := checkGlob(p); err != nil {
			t.Errorf("checkGlob(%q) = %v, want nil", p, err)
		}
	}
	if code, _, stderr := runCLI(t, "list", "--store", closed, "[abc]"); code != ExitUnavailable {
		t.Errorf("list '[abc]' on a closed port: code %d, stderr %q; want %d", code, stderr, ExitUnavailable)
	}
}
