package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/testkit"
)

// statusJSON runs `dlock status --json` on key and decodes it.
func statusJSON(t *testing.T, store, key string) lockStatus {
	t.Helper()
	r := runDlock(t, nil, "status", "--json", "--store", store, key)
	var s lockStatus
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
		t.Fatalf("status %s: %s", key, r)
	}
	return s
}

// TestEtcdStatusAndList: a key held by a dlock run in another process is
// held by a dlock client with the fence its command was given (the
// holding's CreateRevision); a key held by etcdctl is held by "not a dlock
// client"; a free key is free; list shows both held keys and not the free
// one; after the run ends its key is free.
func TestEtcdStatusAndList(t *testing.T) {
	store, ep := etcdStore(t)
	dir := t.TempDir()
	fenceFile, stop := filepath.Join(dir, "fence"), filepath.Join(dir, "stop")
	script := `echo "$DLOCK_FENCE" > "$1"; while [ ! -e "$2" ]; do sleep 0.05; done`
	run := startDlock(t, nil, "run", "--store", store, "--key", "job1", "--", "sh", "-c", script, "sh", fenceFile, stop)
	testkit.WaitFor(t, 20*time.Second, "the run's command to start", func() bool { return readFile(t, fenceFile) != "" })
	fence, err := strconv.ParseUint(readFile(t, fenceFile), 10, 64)
	if err != nil || fence == 0 {
		t.Fatalf("DLOCK_FENCE %q", readFile(t, fenceFile))
	}
	holdWithEtcdctl(t, store, ep, "job2")

	s := statusJSON(t, store, "job1")
	if !s.Held || s.Fence != fence || s.Holds != 1 || s.Holder != "" || s.HolderKind != holderDlock || s.ttl() <= 0 {
		t.Errorf("job1 held by dlock run with fence %d: %+v", fence, s)
	}
	s = statusJSON(t, store, "job2")
	if !s.Held || s.Holder != "" || s.HolderKind != holderForeign || s.Fence <= fence {
		t.Errorf("job2 held by etcdctl after job1: %+v", s)
	}
	if s = statusJSON(t, store, "job3"); s.Held || s.HolderKind != "" || s.TTLms != nil {
		t.Errorf("job3 never locked: %+v", s)
	}
	r := runDlock(t, nil, "list", "--store", store)
	if r.code != 0 || !strings.Contains(r.stdout, "job1") || !strings.Contains(r.stdout, "job2") ||
		strings.Contains(r.stdout, "job3") || !strings.Contains(r.stdout, "(not a dlock client)") {
		t.Errorf("list: %s", r)
	}
	if err := writeFile(stop); err != nil {
		t.Fatal(err)
	}
	if res := run.wait(t, 20*time.Second); res.code != 0 {
		t.Fatalf("run: %s", res)
	}
	if s = statusJSON(t, store, "job1"); s.Held {
		t.Errorf("job1 after its run ended: %+v", s)
	}
}

// TestEtcdDoctorAndBench: doctor prints the session model (1 s
// granularity, the server's clock, one session per client) and the etcd
// store's checks, all OK on a healthy single node; bench runs both
// scenarios with a counter that matches.
func TestEtcdDoctorAndBench(t *testing.T) {
	store, _ := etcdStore(t)
	r := runDlock(t, nil, "doctor", "--store", store)
	if r.code != 0 {
		t.Fatalf("doctor: %s", r)
	}
	for _, want := range []string{"granularity 1s", "expiry on the server's clock", "one session per client (session TTL 10s)",
		"OK    probe acquire", "OK    probe release", "OK    version", "OK    quorum", "OK    leader", "OK    session TTL", "no unsafe setting"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runDlock(t, nil, "bench", "--store", store, "--duration", "500ms", "--goroutines", "8")
	if r.code != 0 {
		t.Fatalf("bench: %s", r)
	}
	for _, want := range []string{"uncontended", "one-key", "ops/s", "fairness"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bench output lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Log(r.stdout)
}

// writeFile creates an empty file at path.
func writeFile(path string) error { return os.WriteFile(path, nil, 0o600) }
