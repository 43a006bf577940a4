package pgserver

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"example.com/dlock/internal/proc"
)

// start runs the postmaster in its own process group. Kill and Pause
// signal it and every child (proc.Tree: PostgreSQL's children each call
// setsid(), so a signal to the group misses them), so that backends die or
// freeze with it, as on a crashed or frozen machine.
func (s *Server) start() error {
	args := []string{"-D", s.dataDir(),
		"-p", fmt.Sprint(s.Port),
		"-k", s.SocketDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "log_min_messages=warning",
		"-c", "TimeZone=UTC",
	}
	if s.tls {
		args = append(args, "-c", "ssl=on", "-c", "ssl_cert_file="+s.Dir+"/tls.crt", "-c", "ssl_key_file="+s.Dir+"/tls.key")
	}
	cmd := s.command("postgres", args...)
	if err := s.run.Start(cmd, proc.Tree); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	return nil
}

// Kill kills the server and all its backends (SIGKILL to each) and waits
// for the postmaster to exit: a crash. Harmless if it is not running.
// Restart recovers it from its data directory.
func (s *Server) Kill() { s.run.Kill() }

// Stop shuts the server down fast (SIGINT: clients are disconnected, their
// transactions rolled back) and waits up to timeout for it to exit, then
// kills it. Harmless if it is not running. Restart starts it again.
func (s *Server) Stop(timeout time.Duration) { s.run.Stop(syscall.SIGINT, timeout) }

// Restart kills the server if it runs, starts it again on the same data
// directory and port, and waits until it accepts connections (after crash
// recovery).
func (s *Server) Restart() error {
	s.Kill()
	if err := s.start(); err != nil {
		return err
	}
	if err := s.WaitReady(startTimeout); err != nil {
		return fmt.Errorf("%w\n--- server log:\n%s", err, proc.Tail(s.Log(), 4000))
	}
	return nil
}

// Remove kills the server and removes its directory.
func (s *Server) Remove() {
	s.Kill()
	_ = os.RemoveAll(s.Dir)
}

// Running reports whether the postmaster was started and has neither exited
// nor been stopped or killed since.
func (s *Server) Running() bool { return s.run.Held() && !s.run.Exited() }

// Pause freezes the server and every backend (SIGSTOP to each): connections
// stay open, nothing answers. Resume continues it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT to each process).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	err := s.run.Signal(sig)
	if errors.Is(err, proc.ErrNotRunning) {
		return fmt.Errorf("pgserver: server on port %d is not running", s.Port)
	}
	return err
}

// Log returns what the server has written so far (bounded).
func (s *Server) Log() string { return s.run.Log() }
