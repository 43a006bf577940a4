package redisserver

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mustDo runs a command and fails the test on error.
func mustDo(t *testing.T, s *Server, args ...string) string {
	t.Helper()
	v, err := s.Do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

func TestStartAnswersPing(t *testing.T) {
	t.Parallel()
	s := Start(t)
	if got := mustDo(t, s, "PING"); got != "PONG" {
		t.Fatalf("PING = %q, want PONG", got)
	}
	if want := "127.0.0.1:" + strconv.Itoa(s.Port()); s.Addr() != want || s.URL() != "redis://"+want {
		t.Fatalf("Addr %q URL %q, want %q", s.Addr(), s.URL(), want)
	}
	if !s.Running() || s.PID() == 0 {
		t.Fatalf("Running %v PID %d, want running", s.Running(), s.PID())
	}
	if _, err := os.Stat(s.Dir() + "/" + logName); err != nil {
		t.Fatalf("log file: %v", err)
	}
	if got := mustDo(t, s, "CONFIG", "GET", "appendonly"); got != "appendonly\nno" {
		t.Fatalf("appendonly = %q", got)
	}
}

func TestKillRefusesConnections(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Kill()
	if s.Running() || s.PID() != 0 {
		t.Fatalf("after Kill: Running %v PID %d", s.Running(), s.PID())
	}
	if _, err := s.Do("PING"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("PING after Kill: %v, want connection refused", err)
	}
	s.Kill() // no-op on a dead server
}

func TestRestartWithoutAOFLosesData(t *testing.T) {
	t.Parallel()
	s := Start(t)
	port := s.Port()
	mustDo(t, s, "SET", "k", "v")
	s.Restart(t)
	if s.Port() != port {
		t.Fatalf("port changed %d -> %d", port, s.Port())
	}
	if v, err := s.Do("GET", "k"); !errors.Is(err, ErrNil) {
		t.Fatalf("GET after restart = %q, %v; want ErrNil", v, err)
	}
}

func TestRestartWithAOFKeepsData(t *testing.T) {
	t.Parallel()
	s := Start(t, WithAOF(true))
	mustDo(t, s, "SET", "k", "v")
	pid := s.PID()
	s.Restart(t)
	if s.PID() == pid {
		t.Fatalf("PID unchanged after Restart")
	}
	if got := mustDo(t, s, "GET", "k"); got != "v" {
		t.Fatalf("GET after restart = %q, want v", got)
	}
}

func TestStopThenRestart(t *testing.T) {
	t.Parallel()
	s := Start(t, WithAOF(false))
	mustDo(t, s, "SET", "k", "v")
	s.Stop() // graceful: the AOF is flushed
	if s.Running() {
		t.Fatal("running after Stop")
	}
	s.Restart(t)
	if got := mustDo(t, s, "GET", "k"); got != "v" {
		t.Fatalf("GET after Stop+Restart = %q, want v", got)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if v, err := s.DoContext(ctx, "PING"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PING while paused = %q, %v; want deadline exceeded", v, err)
	}
	if !s.Running() {
		t.Fatal("paused server reported as not running")
	}
	s.Resume()
	if got := mustDo(t, s, "PING"); got != "PONG" {
		t.Fatalf("PING after Resume = %q", got)
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	s := Start(t, WithArgs("--maxmemory-policy", "allkeys-lru"))
	if got := mustDo(t, s, "CONFIG", "GET", "maxmemory-policy"); got != "maxmemory-policy\nallkeys-lru" {
		t.Fatalf("CONFIG GET = %q", got)
	}
	var re ReplyError
	if _, err := s.Do("NOSUCHCOMMAND"); !errors.As(err, &re) || !strings.HasPrefix(string(re), "ERR") {
		t.Fatalf("unknown command error = %v", err)
	}
}

func TestStartProcessBadArgsFails(t *testing.T) {
	t.Parallel()
	requireBinaries(t)
	s, err := StartProcess(t.TempDir(), WithArgs("--no-such-directive", "x"))
	if err == nil {
		s.Close()
		t.Fatal("StartProcess succeeded with a bad directive")
	}
	if !strings.Contains(err.Error(), "Bad directive") {
		t.Fatalf("error lacks the log tail: %v", err)
	}
}

func TestStartProcessCloseRemovesDir(t *testing.T) {
	t.Parallel()
	requireBinaries(t)
	s, err := StartProcess("")
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("dir %s still exists: %v", dir, err)
	}
	if err := s.RestartProcess(); !errors.Is(err, errClosed) {
		t.Fatalf("RestartProcess after Close = %v", err)
	}
}

func TestStartN(t *testing.T) {
	t.Parallel()
	servers := StartN(t, 5)
	seen := map[int]bool{}
	for _, s := range servers {
		if seen[s.Port()] {
			t.Fatalf("port %d used twice", s.Port())
		}
		seen[s.Port()] = true
		if got := mustDo(t, s, "PING"); got != "PONG" {
			t.Fatalf("%s PING = %q", s.Addr(), got)
		}
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3)
	if len(c.Addrs()) != 3 || len(c.Nodes()) != 3 {
		t.Fatalf("Addrs %v", c.Addrs())
	}
	for _, n := range c.Nodes() {
		if got := infoField(mustDo(t, n, "CLUSTER", "INFO"), "cluster_state"); got != "ok" {
			t.Fatalf("%s cluster_state = %q", n.Addr(), got)
		}
	}
}

func TestSentinel(t *testing.T) {
	t.Parallel()
	s := StartSentinel(t)
	if len(s.SentinelAddrs()) != 3 || s.MasterName() != "mymaster" {
		t.Fatalf("SentinelAddrs %v MasterName %q", s.SentinelAddrs(), s.MasterName())
	}
	for _, sn := range s.Sentinels() {
		got := mustDo(t, sn, "SENTINEL", "get-master-addr-by-name", s.MasterName())
		if want := "127.0.0.1\n" + strconv.Itoa(s.Primary().Port()); got != want {
			t.Fatalf("%s master = %q, want %q", sn.Addr(), got, want)
		}
	}
	if role := infoField(mustDo(t, s.Replica(), "INFO", "replication"), "role"); role != "slave" {
		t.Fatalf("replica role = %q", role)
	}
	addr, err := s.MasterAddr(context.Background())
	if err != nil || addr != s.Primary().Addr() {
		t.Fatalf("MasterAddr = %q, %v", addr, err)
	}
}

// TestNoOrphanAfterTestBinaryKilled SIGKILLs a child test binary that runs a
// server and checks that the server dies with it (Pdeathsig).
func TestNoOrphanAfterTestBinaryKilled(t *testing.T) {
	if dir := os.Getenv("REDISSERVER_ORPHAN_DIR"); dir != "" {
		s, err := StartProcess(dir)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("ADDR " + s.Addr() + "\n")
		select {} // wait to be killed
	}
	t.Parallel()
	requireBinaries(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoOrphanAfterTestBinaryKilled$")
	cmd.Env = append(os.Environ(), "REDISSERVER_ORPHAN_DIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err != nil || !ok {
		t.Fatalf("helper output %q: %v", line, err)
	}
	err = poll("orphan gone", 5*time.Second, 20*time.Millisecond, func() error {
		if _, err := do(context.Background(), addr, "PING"); !errors.Is(err, syscall.ECONNREFUSED) {
			return errors.New("server at " + addr + " still answers")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
