package pgserver

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
)

// TestLifecycle drives one server through every state the package offers
// and checks what pg_isready says in each: a probe that always answered
// true (or false) fails one of the steps.
func TestLifecycle(t *testing.T) {
	s := Start(t)
	if !proc.Within(5*time.Second, s.Ready) {
		t.Fatalf("started server is not ready; log:\n%s", proc.Tail(s.Log(), 2000))
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if proc.Within(500*time.Millisecond, s.Ready) {
		t.Fatal("a SIGSTOPped server answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(20 * time.Second); err != nil {
		t.Fatalf("resumed server: %v", err)
	}
	s.Kill()
	if s.Running() || proc.Within(time.Second, s.Ready) {
		t.Fatal("a killed server still runs or answers")
	}
	if err := s.Pause(); err == nil {
		t.Fatal("Pause of a killed server returned nil")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("restart after kill: %v", err)
	}
	s.Stop(20 * time.Second)
	if s.Running() || proc.Within(time.Second, s.Ready) {
		t.Fatal("a stopped server still runs or answers")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("restart after stop: %v", err)
	}
	dir := s.Dir
	s.Remove()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Remove left %s: %v", dir, err)
	}
}

// TestTwoServers checks that two servers get distinct ports and
// directories and both answer.
func TestTwoServers(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Port == b.Port || a.Dir == b.Dir {
		t.Fatalf("servers share port or dir: %d %s / %d %s", a.Port, a.Dir, b.Port, b.Dir)
	}
	if !proc.Within(5*time.Second, a.Ready) || !proc.Within(5*time.Second, b.Ready) {
		t.Fatal("a server does not answer")
	}
}

// TestFind checks the binary lookup on a name that cannot exist.
func TestFind(t *testing.T) {
	if p := Find("dlock-no-such-binary-7f3a"); p != "" {
		t.Fatalf("Find of a missing binary = %q", p)
	}
}

// state returns the /proc state letter of pid ('T' stopped, 'Z' zombie),
// or 0 when pid is gone.
func state(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// TestSignalsReachBackends checks that Pause freezes and Kill kills the
// server's children too (backends call setsid, so a process-group signal
// would miss them): a killed server's backends left running would keep its
// shared memory and make Restart fail.
func TestSignalsReachBackends(t *testing.T) {
	s := Start(t)
	pid := s.run.Current().Pid()
	kids := proc.Children(pid)
	if len(kids) == 0 {
		t.Fatal("the postmaster has no children (checkpointer, walwriter...): proc.Children is blind")
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		deadline := time.Now().Add(5 * time.Second)
		for st := state(k); st != 'T' && st != 'Z' && st != 0 && time.Now().Before(deadline); st = state(k) {
			time.Sleep(10 * time.Millisecond) // the kernel stops it asynchronously
		}
		if st := state(k); st != 'T' && st != 'Z' && st != 0 { // exited children (a finished backend) do not count
			t.Errorf("child %d in state %q after Pause; want T", k, st)
		}
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	for _, k := range kids {
		deadline := time.Now().Add(5 * time.Second)
		for st := state(k); st != 0 && st != 'Z' && time.Now().Before(deadline); st = state(k) {
			time.Sleep(10 * time.Millisecond)
		}
		if st := state(k); st != 0 && st != 'Z' {
			t.Errorf("child %d in state %q after Kill; want gone", k, st)
		}
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("restart after kill: %v", err)
	}
}

// TestReplica starts a streaming replica and checks that it answers
// (pg_isready) on its own port; the store's tests check that it refuses
// writes and that the primary lists it.
func TestReplica(t *testing.T) {
	p := Start(t)
	r := p.StartReplica(t)
	if r.Port == p.Port || !proc.Within(5*time.Second, r.Ready) {
		t.Fatalf("replica on port %d (primary %d) not ready", r.Port, p.Port)
	}
	if _, err := os.Stat(r.dataDir() + "/standby.signal"); err != nil {
		t.Fatalf("the replica has no standby.signal: %v", err)
	}
}
