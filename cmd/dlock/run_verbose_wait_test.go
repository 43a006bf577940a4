package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// checkVerboseWait: while a holder keeps "k" on store, `run -v` says at once
// that it waits, for which key, held by whom (as status shows it) with its
// fence and remaining lease, and says nothing more while the holder stays;
// when the holder ends, it acquires and exits 0. Without -v (the control)
// it waits silently, as before.
func checkVerboseWait(t *testing.T, store, holderShown string) {
	holder, stdin := runUntilStdinCloses(t, store)
	quiet := startDlock(t, nil, "run", "--store", store, "--key", "k", "--", "true")
	w := startDlock(t, nil, "run", "-v", "--store", store, "--key", "k", "--", "true")
	testkit.WaitFor(t, 10*time.Second, "run -v to say it waits", func() bool { return strings.Contains(w.stderr.String(), "waiting for lock") })
	said := time.Since(w.startedAt)
	first := w.stderr.String()
	if said > 5*time.Second { // process start, connection check and one inspection; slack for -race
		t.Errorf("the waiting line came %v after the start, want at once (within 5s)", said)
	}
	for _, want := range []string{`waiting for lock "k": held by ` + holderShown, "(fence ", "whose lease runs ", "trying with no end (no --wait given)"} {
		if !strings.Contains(first, want) {
			t.Errorf("the waiting line lacks %q:\n%s", want, first)
		}
	}
	// Quiet while nothing changes: after a few polls (2 s apart) the line
	// is still the only one.
	hold := time.Now()
	testkit.WaitFor(t, 30*time.Second, "three polls", func() bool { return time.Since(hold) > 3*waitPollEvery })
	if got := w.stderr.String(); got != first || quiet.stderr.String() != "" {
		t.Errorf("run -v said more while the holder stayed, or run without -v said something:\n-v: %q\nquiet: %q", got, quiet.stderr.String())
	}
	_ = stdin.Close()
	if r := holder.wait(t, 30*time.Second); r.code != 0 {
		t.Fatalf("holder: %v", r)
	}
	if r := w.wait(t, 30*time.Second); r.code != 0 || !strings.Contains(r.stderr, `acquired "k"`) || strings.Count(r.stderr, "waiting for lock") != 1 {
		t.Errorf("run -v after the holder ended: %v", r)
	}
	if r := quiet.wait(t, 30*time.Second); r.code != 0 || r.stderr != "" {
		t.Errorf("run without -v: want exit 0 in silence: %v", r)
	}
}

func TestRunVerboseSaysWhomItWaitsForRedis(t *testing.T) {
	checkVerboseWait(t, redisserver.Start(t).URL(), "") // a token prefix
}

func TestRunVerboseSaysWhomItWaitsForEtcd(t *testing.T) {
	store, _ := etcdStore(t)
	checkVerboseWait(t, store, "a dlock client, token unknown (fence ")
}

// TestRunInterruptedWaitNamesTheSignal: SIGINT during a wait ends run with
// 75 and says "interrupted by SIGINT", not Go's "interrupted by interrupt".
func TestRunInterruptedWaitNamesTheSignal(t *testing.T) {
	store := redisserver.Start(t).URL()
	holder, stdin := runUntilStdinCloses(t, store)
	defer func() { _ = stdin.Close(); holder.wait(t, 30*time.Second) }()
	w := startDlock(t, nil, "run", "-v", "--store", store, "--key", "k", "--", "true")
	testkit.WaitFor(t, 10*time.Second, "run -v to say it waits", func() bool { return strings.Contains(w.stderr.String(), "waiting for lock") })
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	r := w.wait(t, 30*time.Second)
	if r.code != ExitNotAcquired || !strings.Contains(r.stderr, `lock "k" not acquired: interrupted by SIGINT while waiting`) || strings.Contains(r.stderr, "by interrupt") {
		t.Errorf("SIGINT while waiting: %v", r)
	}
}
