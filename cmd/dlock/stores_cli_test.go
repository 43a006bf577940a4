package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/testkit"
)

// checkStoreCommands drives status, list, run, doctor and bench through
// the built binary on store (any store URL), as a user would:
//
//   - status and list: a key held by a `dlock run` in another process is
//     held, once, with the fence its command was given, and listed; a key
//     never locked is neither; after the run ends its key is free.
//   - run: three `dlock run` processes on one key never overlap in a
//     critical section and all get in; the same sections without the lock
//     (the negative control) overlap, so the detector can fail.
//   - doctor exits 0 (no FAIL line: a healthy store) with its probe OK and
//     doctorWants in its output; bench runs both scenarios with a counter
//     that matches (exit 0, not 76).
func checkStoreCommands(t *testing.T, store string, doctorWants ...string) {
	t.Helper()
	dir := t.TempDir()
	fenceFile, stop := filepath.Join(dir, "fence"), filepath.Join(dir, "stop")
	script := `echo "$DLOCK_FENCE" > "$1"; while [ ! -e "$2" ]; do sleep 0.05; done`
	run := startDlock(t, nil, "run", "--store", store, "--key", "job1", "--", "sh", "-c", script, "sh", fenceFile, stop)
	testkit.WaitFor(t, 30*time.Second, "the run's command to start", func() bool { return readFile(t, fenceFile) != "" })
	fence, err := strconv.ParseUint(readFile(t, fenceFile), 10, 64)
	if err != nil || fence == 0 {
		t.Fatalf("DLOCK_FENCE %q", readFile(t, fenceFile))
	}
	if s := statusJSON(t, store, "job1"); !s.Held || s.Fence != fence || s.Holds != 1 || s.HolderKind != holderDlock {
		t.Errorf("status job1, held by a dlock run with fence %d: %+v", fence, s)
	}
	if s := statusJSON(t, store, "job3"); s.Held || s.HolderKind != "" || s.TTLms != nil {
		t.Errorf("status job3, never locked: %+v", s)
	}
	r := runDlock(t, nil, "list", "--store", store)
	if r.code != 0 || !strings.Contains(r.stdout, "job1") || strings.Contains(r.stdout, "job3") {
		t.Errorf("list: %s", r)
	}
	if err := writeFile(stop); err != nil {
		t.Fatal(err)
	}
	if res := run.wait(t, 30*time.Second); res.code != 0 {
		t.Fatalf("run: %s", res)
	}
	if s := statusJSON(t, store, "job1"); s.Held {
		t.Errorf("status job1 after its run ended: %+v", s)
	}

	if entries, overlaps := storeSections(t, store, 3, true); entries != 3 || overlaps != 0 {
		t.Errorf("run with the lock: %d entries (want 3), %d overlaps (want 0)", entries, overlaps)
	}
	if entries, overlaps := storeSections(t, store, 3, false); entries != 3 || overlaps == 0 {
		t.Errorf("negative control without the lock: %d entries, %d overlaps: the detector cannot see an overlap", entries, overlaps)
	}

	r = runDlock(t, nil, "doctor", "--store", store)
	if r.code != 0 || strings.Contains(r.stdout, "FAIL") {
		t.Errorf("doctor on a healthy store: %s", r)
	}
	for _, want := range append([]string{"OK    probe acquire", "OK    probe release"}, doctorWants...) {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("doctor:\n%s", r.stdout)
	r = runDlock(t, nil, "bench", "--store", store, "--duration", "500ms", "--goroutines", "8")
	if r.code != 0 {
		t.Fatalf("bench: %s", r)
	}
	for _, want := range []string{"uncontended", "one-key", "ops/s"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bench output lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("bench:\n%s", r.stdout)
}

// storeSections runs n `dlock run --key section` processes of the
// critical section at once (bare sections with lock false), waits for all,
// and returns the entries and overlaps counted.
func storeSections(t *testing.T, store string, n int, lock bool) (entries, overlaps int) {
	t.Helper()
	dir := t.TempDir()
	section := []string{"sh", "-c", criticalSection, "sh", dir}
	var procs []*exec.Cmd
	for range n {
		c := exec.Command(section[0], section[1:]...)
		if lock {
			c = dlockCmd(t, nil, append([]string{"run", "--store", store, "--key", "section", "--wait", "60s", "--"}, section...)...)
		}
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, c)
	}
	for i, c := range procs {
		if err := waitBounded(c, 90*time.Second); err != nil {
			t.Errorf("process %d (%v): %v", i, c.Args[:2], err)
		}
	}
	return countLines(t, filepath.Join(dir, "entries")), countLines(t, filepath.Join(dir, "overlaps"))
}

// TestEtcdStoreCommands: the store-agnostic check on etcd, where the other
// stores' tests follow it.
func TestEtcdStoreCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a real etcd")
	}
	store, _ := etcdStore(t)
	checkStoreCommands(t, store, "OK    quorum")
}
