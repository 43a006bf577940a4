package mysqlserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"example.com/dlock/internal/proc"
	"example.com/dlock/internal/testcert"
)

// Server is one mariadbd process on its own data directory and port.
type Server struct {
	dir  string
	port int
	bin  string
	tls  *testcert.Set // serve TLS with these and refuse plaintext, if set

	run proc.Handle // the running process and its log
}

// args are mariadbd's arguments: no option files, loopback only, small
// buffers and no durability (fsync is not what the tests are about; a kill
// -9 still loses nothing committed to the OS page cache).
func (s *Server) args() []string {
	// --no-defaults must come first.
	args := []string{
		"--no-defaults",
		"--datadir=" + s.dataDir(),
		"--tmpdir=" + s.tmpDir(),
		"--port=" + strconv.Itoa(s.port),
		"--socket=" + s.Socket(),
		"--bind-address=127.0.0.1",
		"--pid-file=" + s.dir + "/mysqld.pid",
		"--init-file=" + s.initFile(),
		"--skip-name-resolve",
		"--skip-log-bin",
		"--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=16M",
		"--innodb-flush-log-at-trx-commit=2",
		"--max-connections=300",
		"--log-error=", // stderr, into Log
	}
	if s.tls != nil {
		args = append(args, "--ssl-cert="+s.tls.ServerCert, "--ssl-key="+s.tls.ServerKey,
			"--ssl-ca="+s.tls.CA, "--require-secure-transport=ON")
	}
	return append(args, userArgs()...)
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.args()...) //nolint:gosec // test binary
	// Its own process group, and killed if the test binary dies.
	if err := s.run.Start(cmd, proc.Group); err != nil {
		return fmt.Errorf("mysqlserver: start mariadbd: %w", err)
	}
	return nil
}

// Kill kills the server's process group (SIGKILL) and waits for it to exit.
// Harmless if it is not running. Restart starts it again on the same data
// (InnoDB recovers).
func (s *Server) Kill() { s.run.Kill() }

// Restart kills the server if it runs, starts it again on its data directory
// and port, and waits until it greets.
func (s *Server) Restart() error {
	s.Kill()
	if err := s.start(); err != nil {
		return err
	}
	if err := s.waitReady(time.Now().Add(startTimeout)); err != nil {
		return fmt.Errorf("%w\n--- log:\n%s", err, proc.Tail(s.Log(), 4000))
	}
	return nil
}

// Stop shuts the server down gracefully (SIGTERM) and waits up to timeout
// for it to exit, then kills it. Harmless if it is not running. Restart
// starts it again on the same data.
func (s *Server) Stop(timeout time.Duration) { s.run.Stop(syscall.SIGTERM, timeout) }

// Running reports whether the server was started and not stopped or killed
// since.
func (s *Server) Running() bool { return s.run.Held() }

// Pause stops the server with SIGSTOP: connections stay open and every
// statement hangs. Resume continues it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	err := s.run.Signal(sig)
	if errors.Is(err, proc.ErrNotRunning) {
		return fmt.Errorf("mysqlserver: the server is not running")
	}
	return err
}

// Log returns what the server has written so far (its error log).
func (s *Server) Log() string { return s.run.Log() }

// Ready reports whether the server accepts a TCP connection and sends its
// greeting (a MySQL protocol version 10 handshake) before ctx ends; false
// on any error. A paused server accepts (the kernel does) but never greets.
func (s *Server) Ready(ctx context.Context) bool {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		return false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(dl)
	}
	// Packet header: 3 bytes length, 1 byte sequence; then the protocol
	// version (10), or 0xff for an error packet (too many connections,
	// host blocked).
	var b [5]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return false
	}
	return b[4] == 10
}

func (s *Server) waitReady(deadline time.Time) error {
	return proc.Poll(deadline, 50*time.Millisecond, func() error {
		p := s.run.Current()
		if p == nil {
			return proc.Final(fmt.Errorf("mysqlserver: mariadbd is not running"))
		}
		if p.Exited() {
			return proc.Final(fmt.Errorf("mysqlserver: mariadbd exited during start"))
		}
		if proc.Within(time.Second, s.Ready) {
			return nil
		}
		return fmt.Errorf("mysqlserver: mariadbd on %s not ready by the deadline", s.Addr())
	})
}
