package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
)

// --shared, --exclusive and --permits exclude each other, and --permits
// wants N >= 1: a usage error (64) before any I/O (the store here is a
// closed port, which would be 69), nothing run. The control: each flag
// alone on the same closed port gets as far as the store (69).
func TestRunFamilyFlagsExcludeEachOther(t *testing.T) {
	url := fmt.Sprintf("redis://127.0.0.1:%d", closedPort(t))
	for _, flags := range [][]string{
		{"--shared", "--exclusive"}, {"-s", "-x"}, {"--shared", "--permits", "2"},
		{"--exclusive", "--permits", "1"}, {"--permits", "0"}, {"--permits", "-3"},
	} {
		args := append(append([]string{"run", "--store", url}, flags...), "k", "--", "sh", "-c", "echo ran")
		code, out, stderr := runCLI(t, args...)
		if code != ExitUsage || strings.Contains(out, "ran") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, one line", flags, code, out, stderr, ExitUsage)
		}
	}
	for _, flags := range [][]string{{"--shared"}, {"--exclusive"}, {"--permits", "2"}} { // control
		args := append(append([]string{"run", "--store", url}, flags...), "k", "--", "true")
		if code, _, stderr := runCLI(t, args...); code != ExitUnavailable {
			t.Errorf("%v alone: exit %d %q; want %d (it reached the store)", flags, code, stderr, ExitUnavailable)
		}
	}
}

// A store without the read-write lock or the semaphore (mem://bare offers
// the mutex alone) refuses --shared, --exclusive and --permits with 64 and
// one line naming the stores that have them; nothing runs. The control:
// the same flags on mem://full, which has both, run the command.
func TestRunFamilyOnStoreWithoutItIsUsageError(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--shared"}, "has no read-write lock"},
		{[]string{"--exclusive"}, "has no read-write lock"},
		{[]string{"--permits", "2"}, "has no semaphore"},
	} {
		args := append(append([]string{"run", "--store", "mem://bare"}, c.flags...), "fam:k", "--", "sh", "-c", "echo ran")
		code, out, stderr := runCLI(t, args...)
		if code != ExitUsage || out != "" || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "Redis") ||
			strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v on mem://bare: exit %d, stdout %q, stderr %q; want %d, %q naming Redis, one line", c.flags, code, out, stderr, ExitUsage, c.want)
		}
		args[2] = "mem://full" // control
		if code, out, stderr := runCLI(t, args...); code != 0 || out != "ran\n" {
			t.Errorf("%v on mem://full: exit %d, stdout %q, stderr %q; want the command run", c.flags, code, out, stderr)
		}
	}
}

// run --json gives mode (and permits for --permits), and the fields
// stay those documented in docs/cli.md; the command gets DLOCK_FENCE (the
// outcome's fence) and, for the mutex only, DLOCK_TOKEN.
func TestRunFamilyJSONAndEnvironment(t *testing.T) {
	docs := jsonDocs(t)
	for _, c := range []struct {
		flags   []string
		mode    string
		permits int
		token   bool
	}{
		{nil, modeMutex, 0, true},
		{[]string{"--shared"}, modeShared, 0, false},
		{[]string{"--exclusive"}, modeExclusive, 0, false},
		{[]string{"--permits", "3"}, modePermits, 3, false},
	} {
		args := append(append([]string{"run", "--json", "--store", "mem://full"}, c.flags...),
			"fam:json", "--", "sh", "-c", `echo "$DLOCK_FENCE ${DLOCK_TOKEN:+token}"`)
		code, out, stderr := runCLI(t, args...)
		line := lastLine(stderr)
		seen := checkJSON(t, docs["run"], line)
		var o runOutcome
		_ = json.Unmarshal([]byte(line), &o)
		wantOut := fmt.Sprintf("%d ", o.Fence)
		if c.token {
			wantOut += "token"
		}
		if code != 0 || o.Mode != c.mode || o.Permits != c.permits || seen["permits"] != (c.permits > 0) || !o.Acquired ||
			strings.TrimSpace(out) != strings.TrimSpace(wantOut) {
			t.Errorf("%v: exit %d, stdout %q, JSON %s; want mode %s, permits %d, stdout %q", c.flags, code, out, line, c.mode, c.permits, wantOut)
		}
	}
}

// On Redlock, which has the mutex only, --shared exits 64 with the stores
// that have a read-write lock, nothing run; the control: a plain run on the
// same Redlock runs the command.
func TestRunSharedOnRedlockIsUsageError(t *testing.T) {
	srv := redisserver.Start(t)
	url := "redlock://" + strings.TrimPrefix(srv.URL(), "redis://")
	r := runDlock(t, nil, "run", "--store", url, "--shared", "k", "--", "sh", "-c", "echo ran")
	if r.code != ExitUsage || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "has no read-write lock") || !strings.Contains(r.stderr, "redis+sentinel://") {
		t.Fatalf("--shared on Redlock: want %d naming the stores that have it: %s", ExitUsage, r)
	}
	if r := runDlock(t, nil, "run", "--store", url, "k", "--", "sh", "-c", "echo ran"); r.code != 0 || r.stdout != "ran\n" { // control
		t.Fatalf("a plain run on Redlock: %s", r)
	}
}

// run --help and status --help describe the read-write lock and the
// semaphore, and say that the mutex's namespace is separate.
func TestHelpDescribesFamily(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"run", "--shared"}, {"run", "--exclusive"}, {"run", "--permits"}, {"run", "a plain run does not exclude --shared"},
		{"run", "mode (mutex, shared, exclusive, permits)"}, {"status", "writer_waiting"}, {"status", "semaphore (limit, used, holders)"},
	} {
		if _, out, _ := runCLI(t, c.cmd, "--help"); !strings.Contains(out, c.want) {
			t.Errorf("%s --help lacks %q", c.cmd, c.want)
		}
	}
}

// -n with -E N, and --wait, work for --shared and --permits as for the
// lock: a writer holding the key (or the one permit out) makes -n -E 9
// exit 9 with outcome not_acquired, and --wait 300ms exit 75 after at
// least 300ms. The control: -n on a free key runs the command.
func TestRunFamilyConflictExitAndWait(t *testing.T) {
	l, s := memFamily(t)
	w, err := l.Lock(t.Context(), "fam:busy")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(t.Context())
	p, err := s.Acquire(t.Context(), "fam:busy", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(t.Context())
	for _, flags := range [][]string{{"--shared"}, {"--permits", "1"}} {
		args := append(append([]string{"run", "--json", "--store", "mem://full"}, flags...), "-n", "-E", "9", "fam:busy", "--", "true")
		code, _, stderr := runCLI(t, args...)
		var o runOutcome
		_ = json.Unmarshal([]byte(lastLine(stderr)), &o)
		if code != 9 || o.Outcome != outcomeNotAcquired || o.ExitCode != 9 {
			t.Errorf("%v -n -E 9 on a busy key: exit %d %s", flags, code, stderr)
		}
		args = append(append([]string{"run", "--store", "mem://full"}, flags...), "--wait", "300ms", "fam:busy", "--", "true")
		start := time.Now()
		if code, _, stderr := runCLI(t, args...); code != ExitNotAcquired || time.Since(start) < 300*time.Millisecond || !strings.Contains(stderr, "within --wait 300ms") {
			t.Errorf("%v --wait 300ms on a busy key: exit %d after %v: %s", flags, code, time.Since(start), stderr)
		}
		args = append(append([]string{"run", "--store", "mem://full"}, flags...), "-n", "fam:free", "--", "true")
		if code, _, stderr := runCLI(t, args...); code != 0 { // control
			t.Errorf("%v -n on a free key: exit %d %s", flags, code, stderr)
		}
	}
}
