package etcdserver

import (
	"testing"
	"time"

	"example.com/dlock/internal/proc"
)

// TestLifecycle drives one member through every state the package offers and
// checks what /health says in each: a check that always answered true (or
// false) fails one of the steps.
func TestLifecycle(t *testing.T) {
	c := Start(t)
	m := c.Members[0]
	if !proc.Within(5*time.Second, m.Healthy) {
		t.Fatalf("started member is not healthy; log:\n%s", proc.Tail(m.Log(), 2000))
	}
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if proc.Within(300*time.Millisecond, m.Healthy) {
		t.Fatal("a SIGSTOPped member answered /health")
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(10 * time.Second); err != nil {
		t.Fatalf("resumed member: %v", err)
	}
	m.Kill()
	if m.Running() || proc.Within(time.Second, m.Healthy) {
		t.Fatal("a killed member still runs or answers")
	}
	if err := m.Pause(); err == nil {
		t.Fatal("Pause of a killed member returned nil")
	}
	if err := m.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	m.Stop(10 * time.Second)
	if m.Running() || proc.Within(time.Second, m.Healthy) {
		t.Fatal("a stopped member still runs or answers")
	}
}

// TestCluster starts three members and checks that each has its own client
// port and answers.
func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
	seen := map[string]bool{}
	for _, ep := range c.Endpoints() {
		seen[ep] = true
	}
	if len(seen) != 3 {
		t.Fatalf("endpoints %v: want 3 distinct", c.Endpoints())
	}
	for _, m := range c.Members {
		if !proc.Within(5*time.Second, m.Healthy) {
			t.Fatalf("%s not healthy", m.Name)
		}
	}
}

// TestFind checks the binary lookup on a name that cannot exist.
func TestFind(t *testing.T) {
	if p := Find("dlock-no-such-binary-7f3a"); p != "" {
		t.Fatalf("Find of a missing binary = %q", p)
	}
}
