package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/pgserver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/zkserver"
	"example.com/dlock/redisstore"
	"github.com/redis/go-redis/v9"
)

func TestRunMetaIsOneBoundedLine(t *testing.T) {
	at := time.Date(2026, 11, 29, 9, 30, 0, 0, time.FixedZone("CET", 3600))
	m := runMeta("/opt/my tools/run\tjob\x07", at)
	host, _ := os.Hostname()
	want := fmt.Sprintf("host=%s pid=%d cmd=run_job_ since=2026-11-29T08:30:00Z", metaWord(host, 64), os.Getpid())
	if m != want {
		t.Fatalf("runMeta = %q, want %q", m, want)
	}
	long := runMeta(strings.Repeat("é", 500), at)
	if err := driver.ValidateMeta(long); err != nil || len(long) > driver.MaxMetaLen {
		t.Fatalf("runMeta of a long name: %d bytes, %v", len(long), err)
	}
	if got := metaWord("", 8); got != "_" {
		t.Fatalf("metaWord(\"\") = %q", got)
	}
}

// runMetaRE is what `dlock run` records, for a run of `sh` by pid.
func runMetaRE(pid int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`^host=\S+ pid=%d cmd=sh since=(\S+)$`, pid))
}

// checkRunMeta fails unless meta is the metadata of the dlock run with pid,
// started at or after start.
func checkRunMeta(t *testing.T, meta string, pid int, start time.Time) {
	t.Helper()
	m := runMetaRE(pid).FindStringSubmatch(meta)
	if m == nil {
		t.Fatalf("meta %q is not run's (pid %d)", meta, pid)
	}
	since, err := time.Parse(time.RFC3339, m[1])
	if err != nil || since.Before(start.Truncate(time.Second)) || since.After(time.Now()) {
		t.Fatalf("meta since=%s, want a time after %v: %v", m[1], start, err)
	}
}

// A lock held by `dlock run` shows who holds it (host, run's pid, command,
// start time) in status and list, text and JSON, and to a waiter of run -v;
// a lock held without metadata shows as before: no meta line, field or
// column. The token is never printed.
func TestStatusAndListShowHolderMeta(t *testing.T) {
	srv := redisserver.Start(t)
	h, tok := holdKey(t, srv.URL(), "job")
	env := []string{"DLOCK_REDIS=" + srv.URL()}

	r := runDlock(t, env, "status", "--json", "job")
	var st lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
		t.Fatalf("status --json: %v: %s", err, r)
	}
	checkRunMeta(t, st.Meta, h.cmd.Process.Pid, h.startedAt)
	outs := []string{r.stdout, r.stderr}
	r = runDlock(t, env, "status", "job")
	if !strings.Contains(r.stdout, "\nmeta:     "+st.Meta+"\n") {
		t.Errorf("status lacks the meta line %q:\n%s", st.Meta, r.stdout)
	}
	outs = append(outs, r.stdout, r.stderr)
	r = runDlock(t, env, "list")
	if !strings.Contains(r.stdout, "META") || !strings.Contains(r.stdout, st.Meta) {
		t.Errorf("list lacks the META column:\n%s", r.stdout)
	}
	outs = append(outs, r.stdout, r.stderr)
	r = runDlock(t, env, "list", "--json")
	var rows []lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 || rows[0].Meta != st.Meta {
		t.Fatalf("list --json: %v: %s", err, r)
	}
	outs = append(outs, r.stdout, r.stderr)
	w := startDlock(t, env, "run", "-v", "--key", "job", "--", "true")
	testkit.WaitFor(t, 10*time.Second, "run -v to say it waits", func() bool { return strings.Contains(w.stderr.String(), "waiting for lock") })
	if !strings.Contains(w.stderr.String(), "; "+st.Meta+")") {
		t.Errorf("run -v waiting: want the holder's metadata:\n%s", w.stderr)
	}
	outs = append(outs, w.stderr.String())
	for _, out := range outs {
		if strings.Contains(out, tok) {
			t.Fatalf("a whole token was printed:\n%s", out)
		}
	}

	// A holder without metadata (a library caller without WithMeta).
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseOnCleanup(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	r = runDlock(t, env, "status", "plain")
	if r.code != 0 || strings.Contains(r.stdout, "meta:") || !strings.Contains(r.stdout, "held:     yes") {
		t.Errorf("status of a holder without metadata: %s", r)
	}
	r = runDlock(t, env, "status", "--json", "plain")
	if strings.Contains(r.stdout, `"meta"`) {
		t.Errorf("status --json of a holder without metadata has a meta field: %s", r)
	}
	r = runDlock(t, env, "list", "plain")
	if r.code != 0 || strings.Contains(r.stdout, "META") {
		t.Errorf("list of holders without metadata has a META column: %s", r)
	}
}

// checkRunMetaOn: a dlock run holding key on store shows its metadata in
// status --json and list; the run then ends normally.
func checkRunMetaOn(t *testing.T, store, key string) {
	t.Helper()
	dir := t.TempDir()
	ready, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "stop")
	script := `echo x > "$1"; while [ ! -e "$2" ]; do sleep 0.05; done`
	run := startDlock(t, nil, "run", "--store", store, "--key", key, "--", "sh", "-c", script, "sh", ready, stop)
	testkit.WaitFor(t, 30*time.Second, "the run's command to start", func() bool { return readFile(t, ready) != "" })
	s := statusJSON(t, store, key)
	if !s.Held || s.HolderKind != holderDlock {
		t.Errorf("status: %+v", s)
	}
	checkRunMeta(t, s.Meta, run.cmd.Process.Pid, run.startedAt)
	if r := runDlock(t, nil, "list", "--store", store); r.code != 0 || !strings.Contains(r.stdout, s.Meta) {
		t.Errorf("list lacks the metadata: %s", r)
	}
	if err := writeFile(stop); err != nil {
		t.Fatal(err)
	}
	if res := run.wait(t, 30*time.Second); res.code != 0 {
		t.Fatalf("run: %s", res)
	}
}

// On etcd, which keeps only a digest of tokens, status and list show the
// metadata of a dlock run in another process.
func TestEtcdStatusShowsRunMeta(t *testing.T) {
	store, _ := etcdStore(t)
	checkRunMetaOn(t, store, "job")
}

// So do the SQL lease tables, once `dlock schema --apply` made them.
func TestSQLStatusShowsRunMeta(t *testing.T) {
	for name, store := range map[string]string{"postgres": pgserver.Start(t).URL(), "mariadb": mysqlserver.Start(t).URL()} {
		t.Run(name, func(t *testing.T) {
			if r := runDlock(t, nil, "schema", "--store", store, "--apply"); r.code != 0 {
				t.Fatalf("schema --apply: %s", r)
			}
			checkRunMetaOn(t, store, "job")
		})
	}
}

// On ZooKeeper a lock node written as Apache Curator writes it (its
// protected name, the client's IP address as data) shows that data as the
// foreign holder's metadata; a dlock run's node shows run's.
func TestZooKeeperStatusShowsCuratorNodeData(t *testing.T) {
	addr := zkserver.Start(t).Addrs()[0]
	store := "zk://" + addr + "/locks?session-timeout=4s"
	conn, _, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	for _, p := range []string{"/locks", "/locks/ctr"} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	curator := "/locks/ctr/_c_6f1c2a9e-8d3b-4c1e-9a7f-2b5d4e6f8a10-lock-"
	if _, err := conn.Create(curator, []byte("10.1.2.3"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s := statusJSON(t, store, "ctr")
	if !s.Held || s.HolderKind != holderForeign || s.Meta != "10.1.2.3" {
		t.Errorf("status of a Curator holder: %+v", s)
	}
	r := runDlock(t, nil, "status", "--store", store, "ctr")
	if !strings.Contains(r.stdout, "holder:   (not a dlock client)\nmeta:     10.1.2.3\n") {
		t.Errorf("status of a Curator holder:\n%s", r)
	}

	checkRunMetaOn(t, store, "job")
}
