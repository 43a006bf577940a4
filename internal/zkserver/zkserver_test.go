package zkserver

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
)

// TestLifecycle drives one standalone server through every state the
// package offers and checks what srvr says in each: a check that always
// answered (or never did) fails one of the steps.
func TestLifecycle(t *testing.T) {
	start := time.Now()
	e := Start(t)
	t.Logf("standalone server serving after %v", time.Since(start).Round(time.Millisecond))
	s := e.Servers[0]
	if m := s.Mode(5 * time.Second); m != "standalone" {
		t.Fatalf("mode %q, want standalone; log:\n%s", m, proc.Tail(s.Log(), 2000))
	}
	if out, err := s.FourLetter("ruok", time.Second); err != nil || out != "imok" {
		t.Fatalf("ruok = %q, %v", out, err)
	}
	if out, _ := s.FourLetter("mntr", time.Second); !strings.Contains(out, "zk_server_state") {
		t.Fatalf("mntr not allowed: %q", out)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if m := s.Mode(300 * time.Millisecond); m != "" {
		t.Fatalf("a SIGSTOPped server answered srvr: %q", m)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitServing(10 * time.Second); err != nil {
		t.Fatalf("resumed server: %v", err)
	}
	e.Kill(0)
	if s.Running() || s.Mode(time.Second) != "" {
		t.Fatal("a killed server still runs or answers")
	}
	if err := s.Pause(); err == nil {
		t.Fatal("Pause of a killed server returned nil")
	}
	start = time.Now()
	if err := e.Restart(0); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("restarted server serving after %v", time.Since(start).Round(time.Millisecond))
	e.Stop(0)
	if s.Running() || s.Mode(time.Second) != "" {
		t.Fatal("a stopped server still runs or answers")
	}
}

// TestEnsemble starts three servers and checks that they form one quorum
// (one leader, two followers, distinct ports), that a new leader is elected
// when the leader is killed, and that the old leader rejoins as a follower.
func TestEnsemble(t *testing.T) {
	start := time.Now()
	e := StartEnsemble(t, 3)
	t.Logf("3-server ensemble serving after %v", time.Since(start).Round(time.Millisecond))
	seen := map[string]bool{}
	for _, a := range e.Addrs() {
		seen[a] = true
	}
	if len(seen) != 3 {
		t.Fatalf("addresses %v: want 3 distinct", e.Addrs())
	}
	modes := map[string]int{}
	for _, s := range e.Servers {
		modes[s.Mode(5*time.Second)]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("modes %v: want one leader and two followers", modes)
	}
	l := e.Leader(5 * time.Second)
	if l < 0 {
		t.Fatal("no leader")
	}
	e.Kill(l)
	start = time.Now()
	nl := e.Leader(30 * time.Second)
	if nl < 0 || nl == l {
		t.Fatalf("after killing leader %d: leader %d", l, nl)
	}
	t.Logf("new leader after %v", time.Since(start).Round(time.Millisecond))
	if err := e.Restart(l); err != nil {
		t.Fatal(err)
	}
	if m := e.Servers[l].Mode(5 * time.Second); m != "follower" {
		t.Fatalf("restarted old leader is %q, want follower", m)
	}
}
