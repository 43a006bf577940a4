package redisserver

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

const (
	// stopTimeout bounds a graceful Stop before it escalates to SIGKILL.
	stopTimeout = 5 * time.Second
)

// errClosed is returned by RestartProcess after Close.
var errClosed = errors.New("redisserver: server is closed")

// Kill simulates a crash: it SIGKILLs the server's process group and waits
// until the process has exited. It is a no-op if the server is not running,
// and it works on a paused server. Data not yet in the AOF is lost.
func (s *Server) Kill() {
	s.life.Lock()
	defer s.life.Unlock()
	if p := s.current(); p != nil {
		p.Kill()
	}
}

// Stop shuts the server down gracefully: SIGTERM (plus SIGCONT in case it is
// paused), so Redis flushes the AOF and closes connections, then waits for it
// to exit. If it has not exited after 5 s it is SIGKILLed. Stop is a no-op if
// the server is not running; it always returns with the process gone.
func (s *Server) Stop() {
	s.life.Lock()
	defer s.life.Unlock()
	p := s.current()
	if p == nil || p.Exited() {
		return
	}
	p.Stop(syscall.SIGTERM, stopTimeout)
}

// Pause freezes the server with SIGSTOP: connections stay open and the
// kernel still accepts new ones, but nothing is answered until Resume. On
// Linux it returns once the process is actually stopped (bounded by 1 s).
// It is a no-op if the server is not running.
func (s *Server) Pause() {
	p := s.current()
	if p == nil || p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGSTOP) // returns once stopped, bounded by 1 s
}

// Resume continues a paused server with SIGCONT. It is a no-op if the server
// is not running or not paused.
func (s *Server) Resume() {
	p := s.current()
	if p == nil || p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGCONT)
}

// Restart kills the server if it is running (SIGKILL, like Kill) and starts
// it again on the same port, in the same directory and with the same options,
// then waits until it answers PING. With WithAOF the data survives;
// without it the restarted server is empty. It fails the test if the server
// cannot be brought back (for example when another process took the port).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.RestartProcess(); err != nil {
		t.Fatalf("%v", err)
	}
}

// RestartProcess is Restart without a testing.TB. It returns an error
// including the tail of the server log if the server does not come back
// within about 5 s of retries, or if the Server was closed.
func (s *Server) RestartProcess() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errClosed
	}
	if p := s.current(); p != nil {
		p.Kill()
	}
	if err := s.bootSamePort(); err != nil {
		return fmt.Errorf("redisserver: restart %s: %w", s.Addr(), err)
	}
	return nil
}

// Close kills the server, releases its ports and, for a StartProcess server
// created with dir "", removes its directory. It returns the error of that
// removal, if any. Close is idempotent; the Server cannot be restarted
// afterwards. Start and its relatives call Close from t.Cleanup.
func (s *Server) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	p := s.p
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	releasePorts(s.port, s.busPort)
	if s.ownDir {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("redisserver: remove %s: %w", s.dir, err)
		}
	}
	return nil
}
