package mysqlserver

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
)

// query runs sql with the mariadb command-line client as the test user, if
// the client is installed (mariadb-server depends on it), else skips.
func query(t *testing.T, s *Server, sql string) (string, error) {
	t.Helper()
	cli := Find("mariadb")
	if cli == "" {
		t.Skip("mariadb client not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, "--no-defaults", "-u"+User, "-p"+Password,
		"-h127.0.0.1", "-P"+strconv.Itoa(s.Port()), "-N", "-B", Database, "-e", sql).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestLifecycle drives one server through every state the package offers and
// checks its greeting in each: a check that always answered true (or false)
// fails one of the steps. Data committed before a kill -9 is there after the
// restart.
func TestLifecycle(t *testing.T) {
	s := Start(t)
	if !proc.Within(5*time.Second, s.Ready) {
		t.Fatalf("started server does not greet; log:\n%s", proc.Tail(s.Log(), 2000))
	}
	if out, err := query(t, s, "CREATE TABLE k (v INT) ENGINE=InnoDB; INSERT INTO k VALUES (42)"); err != nil {
		t.Fatalf("as %s on %s: %v: %s", User, Database, err, out)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if proc.Within(300*time.Millisecond, s.Ready) {
		t.Fatal("a SIGSTOPped server greeted")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if !proc.Within(10*time.Second, s.Ready) {
		t.Fatal("resumed server does not greet")
	}
	s.Kill()
	if s.Running() || proc.Within(time.Second, s.Ready) {
		t.Fatal("a killed server still runs or greets")
	}
	if err := s.Pause(); err == nil {
		t.Fatal("Pause of a killed server returned nil")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if out, err := query(t, s, "SELECT v FROM k"); err != nil || out != "42" {
		t.Fatalf("after kill -9 and restart: %q, %v (want 42)", out, err)
	}
	s.Stop(20 * time.Second)
	if s.Running() || proc.Within(time.Second, s.Ready) {
		t.Fatal("a stopped server still runs or greets")
	}
}

// TestLaunch starts a server the way a TestMain does and checks the DSN and
// URL name its port and credentials.
func TestLaunch(t *testing.T) {
	requireBinaries(t)
	dir, err := os.MkdirTemp("", "mysqlserver-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	s, err := Launch(dir)
	if s != nil {
		defer s.Kill()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bootstrap and start: %v", time.Since(start).Round(time.Millisecond))
	want := "dlock:dlock-test@tcp(127.0.0.1:" + strconv.Itoa(s.Port()) + ")/dlock?parseTime=true&x=1"
	if got := s.DSN("x=1"); got != want {
		t.Fatalf("DSN = %q, want %q", got, want)
	}
	if got := s.URL(); got != "mysql://dlock:dlock-test@"+s.Addr()+"/dlock" {
		t.Fatalf("URL = %q", got)
	}
	if out, err := query(t, s, "SELECT 1"); err != nil || out != "1" {
		t.Fatalf("SELECT 1: %q, %v", out, err)
	}
}

// TestFind checks the binary lookup on a name that cannot exist.
func TestFind(t *testing.T) {
	if p := Find("dlock-no-such-binary-7f3a"); p != "" {
		t.Fatalf("Find of a missing binary = %q", p)
	}
}
