package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

func TestUsageAndUnreachableThroughBinary(t *testing.T) {
	r := runDlock(t, nil, "run", "--key", "k", "--lease", "1ms", "--", "true")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--lease 1ms") {
		t.Errorf("bad --lease: want exit %d and a message: %s", ExitUsage, r)
	}
	r = runDlock(t, nil, "run", "--nope")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "unknown flag: --nope") {
		t.Errorf("unknown flag: want exit %d and a message: %s", ExitUsage, r)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
	for _, args := range [][]string{
		{"run", "--redis", "redis://" + addr, "--key", "k", "--", "true"},
		{"status", "k"},
		{"list"},
		{"doctor"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel() // each spends ~2 s in go-redis's dial retries
			r := runDlock(t, []string{"DLOCK_REDIS=redis://" + addr}, args...)
			if r.code != ExitUnavailable || !strings.Contains(r.stderr, "cannot reach redis "+addr) {
				t.Errorf("dlock %q against a closed port: want exit %d and a message: %s", args, ExitUnavailable, r)
			}
		})
	}
}

// holdKey starts `dlock run` holding key with a child that stores its token
// in dir/token, and returns the process and the token once it holds.
func holdKey(t *testing.T, url, key string) (*started, string) {
	t.Helper()
	dir := t.TempDir()
	s := startDlock(t, []string{"D=" + dir}, "run", "--redis", url, "--key", key, "--",
		"sh", "-c", `echo $$ > "$D/pid"; printf %s "$DLOCK_TOKEN" > "$D/token.tmp"; mv "$D/token.tmp" "$D/token"; exec sleep 60`)
	t.Cleanup(func() { killGroupOf(t, filepath.Join(dir, "pid")) })
	var tok string
	testkit.WaitFor(t, 20*time.Second, "the holder to start", func() bool {
		tok = readFile(t, filepath.Join(dir, "token"))
		return tok != ""
	})
	return s, tok
}

func TestStatusAndList(t *testing.T) {
	srv := redisserver.Start(t)
	h, tok := holdKey(t, srv.URL(), "orders:1")
	holdKey(t, srv.URL(), "orders:2")
	holdKey(t, srv.URL(), "other")
	// A waiter, visible as a subscriber of the release channel.
	startDlock(t, nil, "run", "--redis", srv.URL(), "--key", "orders:1", "--", "true")
	env := []string{"DLOCK_REDIS=" + srv.URL()}

	var st lockStatus
	testkit.WaitFor(t, 10*time.Second, "status to show one waiter", func() bool {
		r := runDlock(t, env, "status", "--json", "orders:1")
		if r.code != 0 {
			t.Fatal(r)
		}
		st = lockStatus{}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("%v: %s", err, r)
		}
		return st.Waiters != nil && *st.Waiters == 1
	})
	if !st.Held || st.Holds != 1 || st.Fence == 0 || st.ttl() <= 0 || st.ttl() > 30000 || st.Holder != tok[:6] || st.HolderKind != holderDlock {
		t.Fatalf("status: %+v", st)
	}

	r := runDlock(t, env, "status", "orders:1")
	for _, want := range []string{"held:     yes", "holder:   " + tok[:6] + "…", "holds:    1", "fence:    1", "waiters:  1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runDlock(t, env, "status", "free")
	if r.code != 0 || !strings.Contains(r.stdout, "held:     no") {
		t.Errorf("status of a free key: %s", r)
	}

	r = runDlock(t, env, "list", "--json", "orders:*")
	var rows []lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || r.code != 0 {
		t.Fatalf("list --json: %v: %s", err, r)
	}
	if len(rows) != 2 || rows[0].Key != "orders:1" || rows[1].Key != "orders:2" || !rows[0].Held {
		t.Fatalf("list orders:* = %+v; want orders:1 and orders:2", rows)
	}
	r = runDlock(t, env, "list")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 4 || !strings.Contains(r.stdout, "other") {
		t.Fatalf("list: want a header and 3 locks: %s", r)
	}
	if strings.Contains(r.stdout, ":fence") {
		t.Errorf("list shows fence counters: %s", r.stdout)
	}
	for _, out := range []string{r.stdout, r.stderr} {
		if strings.Contains(out, tok) {
			t.Fatalf("list printed a whole token")
		}
	}

	// Once released, the lock disappears from list and status says so.
	_ = h.cmd.Process.Kill() // dlock dies without releasing: the key must still be there
	h.wait(t, 10*time.Second)
	if r := runDlock(t, env, "status", "orders:1"); !strings.Contains(r.stdout, "held:     yes") {
		t.Errorf("a killed holder's lock is held until its TTL runs out: %s", r)
	}
}

func TestStatusOverSentinelAndCluster(t *testing.T) {
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		s := redisserver.StartSentinel(t)
		addrs := s.SentinelAddrs()
		u := fmt.Sprintf("redis://%s?master_name=%s&addr=%s&addr=%s", addrs[0], s.MasterName(), addrs[1], addrs[2])
		checkStatusVia(t, "--redis-sentinel", u)
		held(t, "--store", fmt.Sprintf("redis+sentinel://%s/%s", strings.Join(addrs, ","), s.MasterName()), "c")
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := redisserver.StartCluster(t, 3)
		addrs := c.Addrs()
		u := fmt.Sprintf("redis://%s?addr=%s&addr=%s", addrs[0], addrs[1], addrs[2])
		checkStatusVia(t, "--redis-cluster", u)
		held(t, "--store", "redis+cluster://"+strings.Join(addrs, ","), "c")
		r := runDlock(t, nil, "list", "--redis-cluster", u)
		for _, k := range []string{"a", "b", "c", "d"} {
			if !strings.Contains(r.stdout, "\n"+k+" ") {
				t.Errorf("list over the cluster lacks %q: %s", k, r)
			}
		}
	})
}

// held checks that status through flag=url sees key held, and that a key
// nobody took is not (the control).
func held(t *testing.T, flag, url, key string) {
	t.Helper()
	for k, want := range map[string]bool{key: true, "never-taken": false} {
		r := runDlock(t, nil, "status", "--json", flag, url, k)
		var st lockStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Held != want {
			t.Fatalf("status %s %s %s: %v %+v, want held=%v: %s", flag, url, k, err, st, want, r)
		}
	}
}

// checkStatusVia holds keys through flag=url and checks status sees them.
func checkStatusVia(t *testing.T, flag, url string) {
	t.Helper()
	for _, k := range []string{"a", "b", "c", "d"} { // spread over Cluster slots
		dir := t.TempDir()
		startDlock(t, []string{"D=" + dir}, "run", flag, url, "--key", k, "--", "sh", "-c", `echo $$ > "$D/pid"; echo > "$D/ready"; exec sleep 60`)
		t.Cleanup(func() { killGroupOf(t, filepath.Join(dir, "pid")) })
		testkit.WaitFor(t, 20*time.Second, "holder of "+k, func() bool { return fileExists(filepath.Join(dir, "ready")) })
	}
	r := runDlock(t, nil, "status", "--json", flag, url, "c")
	var st lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Held || st.Fence == 0 {
		t.Fatalf("status over %s: %v %+v: %s", flag, err, st, r)
	}
}
