package redisserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"

	"example.com/dlock/internal/proc"
)

// ErrNotInstalled is returned (wrapped) by StartProcess when redis-server
// cannot be found in PATH.
var ErrNotInstalled = errors.New("redis-server not found in PATH")

// Server is one redis-server (or sentinel) process on 127.0.0.1. Its port,
// directory and options are fixed for its whole life, so Restart brings the
// same server back. All methods are safe for concurrent use.
type Server struct {
	bin     string
	dir     string
	ownDir  bool
	cfg     config
	port    int
	busPort int

	life   sync.Mutex // serialises Kill, Stop, Restart and Close
	mu     sync.Mutex // guards p and closed
	p      *proc.Process
	closed bool
}

// Start starts a redis-server in t.TempDir() on a free loopback port and
// waits until it answers PING. A t.Cleanup kills it (and logs the tail of its
// log if the test failed). If redis-server is not installed the test is
// skipped, or fails when the environment variable CI is "true". Any other
// start failure fails the test with the server's log tail.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	requireBinaries(t)
	s, err := StartProcess(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("redisserver: %v", err)
	}
	registerCleanup(t, s)
	return s
}

// StartN starts n independent servers concurrently with the same options,
// for example the five primaries of a Redlock test. It fails or skips the
// test like Start; if any server fails to start, the ones that did start are
// still cleaned up.
func StartN(t testing.TB, n int, opts ...Option) []*Server {
	t.Helper()
	requireBinaries(t)
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = StartProcess(dirs[i], opts...) })
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			registerCleanup(t, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("redisserver: StartN(%d): %v", n, err)
	}
	return servers
}

// StartProcess starts a server without a testing.TB, for demos and
// benchmarks. It uses dir as the working directory, or a new temporary
// directory when dir is "" (removed again by Close). It waits until the
// server answers PING. On failure it returns an error that wraps the cause
// (ErrNotInstalled when the binary is missing) and includes the tail of the
// server log; no process is left running. The caller must call Close.
func StartProcess(dir string, opts ...Option) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redisserver: %w: %w", ErrNotInstalled, err)
	}
	s := &Server{bin: bin, dir: dir, cfg: newConfig(opts)}
	if dir == "" {
		if s.dir, err = os.MkdirTemp("", "redisserver-"); err != nil {
			return nil, fmt.Errorf("redisserver: temp dir: %w", err)
		}
		s.ownDir = true
	}
	if err := s.bootFresh(); err != nil {
		if s.ownDir {
			_ = os.RemoveAll(s.dir)
		}
		return nil, err
	}
	return s, nil
}

// requireBinaries skips the test when redis-server or one of names (such as
// redis-cli) is missing, or fails it when CI is "true".
func requireBinaries(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range append([]string{"redis-server"}, names...) {
		if _, err := exec.LookPath(name); err == nil {
			continue
		}
		if os.Getenv("CI") == "true" {
			t.Fatal(name + " not found; run scripts/test.sh")
		}
		t.Skipf("%s not found; install it with: apt-get install -y redis-server redis-tools", name)
	}
}

// registerCleanup kills s when the test ends, logging its log tail first if
// the test failed. It runs before the removal of s's t.TempDir().
func registerCleanup(t testing.TB, s *Server) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("redisserver: log of %s (%s):\n%s", s.Addr(), s.dir, s.logTail(logOffsets{}))
		}
		if err := s.Close(); err != nil {
			t.Errorf("redisserver: close %s: %v", s.Addr(), err)
		}
	})
}

// Addr returns the server address, "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (logs, AOF, nodes.conf,
// sentinel.conf).
func (s *Server) Dir() string { return s.dir }

// URL returns the server address as "redis://127.0.0.1:port".
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Running reports whether the server process is alive (a paused process is
// alive).
func (s *Server) Running() bool {
	p := s.current()
	return p != nil && !p.Exited()
}

// PID returns the process id of the running server, or 0 if it is not
// running.
func (s *Server) PID() int {
	p := s.current()
	if p == nil || p.Exited() {
		return 0
	}
	return p.Pid()
}

func (s *Server) current() *proc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

func (s *Server) setProc(p *proc.Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p = p
}
