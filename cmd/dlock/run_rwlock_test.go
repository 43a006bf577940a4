package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// insideScript is a holder's command: it marks itself inside ($D/inside,
// removed when SIGTERM ends it), records its fence and pid, says it is
// ready, and records how many other holders' commands are inside at that
// moment ($R/*/inside besides its own) in $D/others.
const insideScript = `
echo $$ > "$D/pid"
echo "$DLOCK_FENCE" > "$D/fence"
touch "$D/inside"
trap 'rm -f "$D/inside"; exit 7' TERM
n=0; for f in "$R"/*/inside; do [ -e "$f" ] && [ "$f" != "$D/inside" ] && n=$((n+1)); done
echo $n > "$D/others"
echo ready > "$D/ready"
while :; do sleep 0.05; done`

// familyHolder is one `dlock run` of a test of the read-write lock or the
// semaphore, its command insideScript in a directory of its own under root.
type familyHolder struct {
	*started
	dir string
}

// startFamily starts `dlock run --store URL FLAGS KEY -- insideScript` with
// its own directory root/name, without waiting for its command.
func startFamily(t *testing.T, url, root, name, key string, flags ...string) *familyHolder {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "--store", url}, flags...)
	args = append(args, key, "--", "sh", "-c", insideScript)
	return &familyHolder{started: startDlock(t, []string{"D=" + dir, "R=" + root}, args...), dir: dir}
}

// ready waits until h's command runs.
func (h *familyHolder) ready(t *testing.T) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, "the command of "+h.dir+" to start", func() bool {
		select {
		case <-h.done:
			t.Fatalf("dlock exited early: %s", h.res)
		default:
		}
		return readFile(t, filepath.Join(h.dir, "ready")) == "ready"
	})
}

// running reports whether h's command has started.
func (h *familyHolder) running(t *testing.T) bool {
	return readFile(t, filepath.Join(h.dir, "ready")) == "ready"
}

// waiting waits until h's -v stderr says it waits for what.
func (h *familyHolder) waiting(t *testing.T, what string) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, h.dir+" to say it waits", func() bool {
		return strings.Contains(h.stderr.String(), "dlock: waiting for "+what)
	})
}

// stop ends h's command with SIGTERM (forwarded) and checks that dlock
// exits with the command's 7.
func (h *familyHolder) stop(t *testing.T) {
	t.Helper()
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	if r := h.wait(t, 20*time.Second); r.code != 7 {
		t.Fatalf("%s: want the command's exit 7 after SIGTERM: %s", h.dir, r)
	}
}

func (h *familyHolder) others(t *testing.T) int {
	return atoi(t, readFile(t, filepath.Join(h.dir, "others")))
}

func (h *familyHolder) fence(t *testing.T) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(readFile(t, filepath.Join(h.dir, "fence")), 10, 64)
	if err != nil {
		t.Fatalf("%s: DLOCK_FENCE: %v", h.dir, err)
	}
	return n
}

// Two --shared runs of one key hold it at once: both commands run together
// (the second sees the first inside); an --exclusive run waits for them
// (it says so with -v and its command does not start), then runs alone
// once they end, with a fence above theirs. The control: a second
// --exclusive -n while the writer holds is refused (75), so the detector
// (a command seeing another inside) would catch an exclusive that let a
// reader or writer in.
func TestRunSharedOverlapAndExclusiveWaits(t *testing.T) {
	srv := redisserver.Start(t)
	root := t.TempDir()
	r1 := startFamily(t, srv.URL(), root, "r1", "rw", "--shared")
	r1.ready(t)
	r2 := startFamily(t, srv.URL(), root, "r2", "rw", "-s")
	r2.ready(t)
	if r2.others(t) != 1 {
		t.Fatalf("the second --shared command saw %d others inside, want the first (1): shared holdings did not overlap", r2.others(t))
	}
	w := startFamily(t, srv.URL(), root, "w", "rw", "--exclusive", "-v")
	w.waiting(t, `read-write lock "rw": held by reader`)
	if w.running(t) {
		t.Fatal("the --exclusive command started while two readers held the key")
	}
	r1.stop(t)
	if w.running(t) {
		t.Fatal("the --exclusive command started while a reader still held the key")
	}
	r2.stop(t)
	w.ready(t)
	if w.others(t) != 0 {
		t.Fatalf("the --exclusive command saw %d others inside", w.others(t))
	}
	if f := w.fence(t); f <= r1.fence(t) || f <= r2.fence(t) {
		t.Errorf("writer's fence %d is not above the readers' %d, %d", f, r1.fence(t), r2.fence(t))
	}
	for _, flag := range []string{"--exclusive", "--shared"} { // control: the writer excludes both
		if r := runDlock(t, nil, "run", "--store", srv.URL(), flag, "-n", "rw", "--", "true"); r.code != ExitNotAcquired {
			t.Fatalf("%s -n while a writer holds: want %d: %s", flag, ExitNotAcquired, r)
		}
	}
	w.stop(t)
}

// A queued --exclusive keeps a later --shared out: while a reader holds
// and a writer waits, a new --shared -n is refused (75) and an unbounded
// --shared waits until the writer has run. The control: the same --shared
// -n before the writer queued gets in (0).
func TestRunQueuedExclusiveKeepsLaterSharedOut(t *testing.T) {
	srv := redisserver.Start(t)
	root := t.TempDir()
	r1 := startFamily(t, srv.URL(), root, "r1", "q", "--shared")
	r1.ready(t)
	if r := runDlock(t, nil, "run", "--store", srv.URL(), "--shared", "-n", "q", "--", "true"); r.code != 0 { // control
		t.Fatalf("--shared -n beside a reader, no writer queued: want 0: %s", r)
	}
	w := startFamily(t, srv.URL(), root, "w", "q", "--exclusive", "-v")
	w.waiting(t, `read-write lock "q"`)
	code, out, _ := runCLI(t, "status", "--json", "--store", srv.URL(), "q")
	var st lockStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.RW == nil || !st.RW.WriterWaiting || len(st.RW.Readers) != 1 {
		t.Fatalf("status while a writer waits: exit %d %s; want one reader and writer_waiting", code, out)
	}
	if r := runDlock(t, nil, "run", "--store", srv.URL(), "--shared", "-n", "q", "--", "true"); r.code != ExitNotAcquired ||
		!strings.Contains(r.stderr, "a writer queued") {
		t.Fatalf("--shared -n behind a queued writer: want %d naming the writer: %s", ExitNotAcquired, r)
	}
	r2 := startFamily(t, srv.URL(), root, "r2", "q", "--shared", "-v")
	r2.waiting(t, `read-write lock "q"`)
	r1.stop(t)
	w.ready(t)
	if r2.running(t) || w.others(t) != 0 {
		t.Fatalf("the later reader ran before the queued writer (or beside it: %d others)", w.others(t))
	}
	w.stop(t)
	r2.ready(t)
	if r2.fence(t) <= w.fence(t) {
		t.Errorf("the later reader's fence %d is not above the writer's %d", r2.fence(t), w.fence(t))
	}
	r2.stop(t)
}

// A read-write lock's holding that the store loses stops the command and
// run exits 76, as the mutex's does: the key's hash deleted under a
// --exclusive run.
func TestRunExclusiveLostStopsCommand(t *testing.T) {
	srv := redisserver.Start(t)
	root := t.TempDir()
	const lease = 900 * time.Millisecond
	h := startFamily(t, srv.URL(), root, "w", "lost", "--exclusive", "--lease", lease.String(), "--json")
	h.ready(t)
	if _, err := srv.Do("DEL", "dlock:{lost}:rw", "dlock:{lost}:rw:exp"); err != nil {
		t.Fatal(err)
	}
	r := h.wait(t, 20*time.Second)
	var o runOutcome
	_ = json.Unmarshal([]byte(lastLine(r.stderr)), &o)
	if r.code != ExitLost || o.Outcome != outcomeLost || o.Mode != modeExclusive || !strings.Contains(r.stderr, "write holding was lost") {
		t.Fatalf("want exit %d, outcome lost, mode exclusive: %s", ExitLost, r)
	}
	if pid := atoi(t, readFile(t, filepath.Join(h.dir, "pid"))); !processGone(pid) {
		t.Errorf("command %d still running", pid)
	}
}

// The mutex and the read-write lock of one key are different locks (their
// namespaces are separate, docs/cli.md): a plain run gets KEY while an
// --exclusive run holds it. The control: a second plain run -n is refused.
func TestRunMutexAndRWLockAreSeparate(t *testing.T) {
	srv := redisserver.Start(t)
	root := t.TempDir()
	w := startFamily(t, srv.URL(), root, "w", "both", "--exclusive")
	w.ready(t)
	m := startFamily(t, srv.URL(), root, "m", "both")
	m.ready(t)
	if r := runDlock(t, nil, "run", "--store", srv.URL(), "-n", "both", "--", "true"); r.code != ExitNotAcquired { // control
		t.Fatalf("plain -n while a plain run holds: want %d: %s", ExitNotAcquired, r)
	}
	if m.others(t) != 1 {
		t.Errorf("the mutex's command saw %d others inside, want the writer's", m.others(t))
	}
	m.stop(t)
	w.stop(t)
}

// --exclusive, --shared and --permits renew their holding while the
// command runs, as the lock does: with --lease 900ms the holding is still
// there, with the fence its command got, after three leases, and status
// saw its remaining lease go back up (a renewal). Checked by hand: with
// run's WithAutoRenew replaced by a fixed WithTTL, every case fails within
// one lease ("the holding is gone after 880ms").
func TestRunFamilyRenewsLease(t *testing.T) {
	srv := redisserver.Start(t)
	const lease = 900 * time.Millisecond
	for _, flags := range [][]string{{"--exclusive"}, {"--shared"}, {"--permits", "2"}} {
		t.Run(flags[0], func(t *testing.T) {
			root := t.TempDir()
			key := "renew" + flags[0]
			h := startFamily(t, srv.URL(), root, "h", key, append(flags, "--lease", lease.String())...)
			h.ready(t)
			start, fence := time.Now(), h.fence(t)
			prev, renewed := int64(-1), false
			testkit.WaitFor(t, 20*time.Second, "three leases with the holding renewed", func() bool {
				ttl, f, ok := familyTTL(t, srv.URL(), key)
				if !ok || f != fence {
					t.Fatalf("the holding (fence %d) is gone after %v: %v %d", fence, time.Since(start), ok, f)
				}
				renewed = renewed || prev >= 0 && ttl > prev
				prev = ttl
				return renewed && time.Since(start) > 3*lease
			})
			h.stop(t)
		})
	}
}

// familyTTL is the remaining lease and fence of key's only holding, read
// or write lock or semaphore, as status --json shows it.
func familyTTL(t *testing.T, url, key string) (ttl int64, fence uint64, ok bool) {
	t.Helper()
	code, out, stderr := runCLI(t, "status", "--json", "--store", url, key)
	var st lockStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status: exit %d %s %s", code, out, stderr)
	}
	var hs []holderStatus
	if st.RW != nil {
		hs = st.RW.holders()
	}
	if st.Sem != nil && len(hs) == 0 {
		hs = st.Sem.Holders
	}
	if len(hs) != 1 {
		return 0, 0, false
	}
	return hs[0].TTLms, hs[0].Fence, true
}
