package etcdserver

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
)

// healthyWithin asks m's /health with a bound of d.
func healthyWithin(m *Member, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return m.Healthy(ctx)
}

// TestLifecycle drives one member through every state the package offers and
// checks what /health says in each: a check that always answered true (or
// false) fails one of the steps.
func TestLifecycle(t *testing.T) {
	c := Start(t)
	m := c.Members[0]
	if !healthyWithin(m, 5*time.Second) {
		t.Fatalf("started member is not healthy; log:\n%s", proc.Tail(m.Log(), 2000))
	}
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if healthyWithin(m, 300*time.Millisecond) {
		t.Fatal("a SIGSTOPped member answered /health")
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(10 * time.Second); err != nil {
		t.Fatalf("resumed member: %v", err)
	}
	m.Kill()
	if m.Running() || healthyWithin(m, time.Second) {
		t.Fatal("a killed member still runs or answers")
	}
	if err := m.Pause(); err == nil {
		t.Fatal("Pause of a killed member returned nil")
	}
	if err := m.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	m.Stop(10 * time.Second)
	if m.Running() || healthyWithin(m, time.Second) {
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
		if !healthyWithin(m, 5*time.Second) {
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
