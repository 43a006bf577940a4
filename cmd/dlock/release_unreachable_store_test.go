package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/etcdserver"
	"example.com/dlock/internal/testkit"
)

// runUntilStdinCloses starts `dlock run -v` on store with a command that
// runs until its stdin (a pipe the test holds) is closed, and waits until
// the lock is acquired. Closing the returned writer ends the command.
func runUntilStdinCloses(t *testing.T, store string) (*started, io.WriteCloser) {
	t.Helper()
	s := &started{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = dlockCmd(t, nil, "run", "-v", "--store", store, "--key", "k", "--grace", "1s", "--", "cat")
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	s = startedCmd(t, s)
	testkit.WaitFor(t, 30*time.Second, "dlock to acquire", func() bool { return strings.Contains(s.stderr.String(), "acquired") })
	return s, stdin
}

// TestRunReleaseBoundedWhenEtcdDies: etcd dies while the command runs, then
// the command ends. The release that cannot reach etcd, and the store's
// Close, are bounded by a sixth of the session TTL (10 s here: about 1.7 s
// each), so run exits within a few seconds, and its warning gives the
// session's TTL, not --lease. The old code spent 10 s in the release and 5 s
// more in Close, and said "expires within 30s".
func TestRunReleaseBoundedWhenEtcdDies(t *testing.T) {
	c := etcdserver.Start(t)
	s, stdin := runUntilStdinCloses(t, "etcd://"+c.Members[0].Addr()+"/locks")
	c.Members[0].Kill()
	ended := time.Now()
	_ = stdin.Close()
	r := s.wait(t, time.Minute)
	took := time.Since(ended)
	t.Logf("exit %d %v after the command ended; stderr:\n%s", r.code, took, r.stderr)
	if took > 8*time.Second { // 2 × 1.7 s, plus slack for a -race binary on a busy machine
		t.Errorf("run exited %v after the command ended, want within 8s", took)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "release of \"k\" failed; the store frees it at most 10s after its last renewal (the session TTL)") ||
		strings.Contains(r.stderr, "retried in the background") { // run exits: nothing retries

		t.Errorf("want exit 0 and a warning naming the 10s session TTL; got %v", r)
	}
}

// TestRunLossOnDeadEtcdExitsPromptly: with ?session-ttl=2s, etcd dies while
// run holds the lock. The loss is reported within the session's TTL (plus
// a renewal's bound), the command is stopped, and run exits 76 within the
// release's and Close's bounds (1 s each here) after the loss; the old code
// spent about 6.5 s there (5 s of them in Close).
func TestRunLossOnDeadEtcdExitsPromptly(t *testing.T) {
	c := etcdserver.Start(t)
	s, stdin := runUntilStdinCloses(t, "etcd://"+c.Members[0].Addr()+"/locks?session-ttl=2s")
	defer stdin.Close()
	c.Members[0].Kill()
	killed := time.Now()
	testkit.WaitFor(t, 30*time.Second, "the loss to be reported", func() bool { return strings.Contains(s.stderr.String(), "lock lost") })
	lost := time.Now()
	r := s.wait(t, time.Minute)
	t.Logf("loss reported %v after etcd died, exit %d %v after the loss; stderr:\n%s", lost.Sub(killed), r.code, time.Since(lost), r.stderr)
	if r.code != ExitLost {
		t.Errorf("want exit %d with the loss reported; got %v", ExitLost, r)
	}
	if took := time.Since(lost); took > 4500*time.Millisecond { // the command's end + 2 × 1 s, plus slack
		t.Errorf("run exited %v after reporting the loss, want within 4.5s", took)
	}
}
