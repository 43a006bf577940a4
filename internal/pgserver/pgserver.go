// Package pgserver starts real PostgreSQL servers (Debian's postgresql 15,
// from /usr/lib/postgresql/15/bin or PATH) for the tests of every module:
// one server per call on a free loopback port, with its data directory and
// unix socket directory in a fresh temporary directory, and stops, kills,
// restarts and pauses it. The server is killed and its directory removed
// when the test ends.
//
// PostgreSQL refuses to run as root, so when the test runs as root the
// server runs as the unprivileged Debian user "postgres" (the directory is
// made its own). The cluster is made by initdb with trust authentication
// for the superuser "postgres" on loopback only, and runs with fsync off
// (tests need no durability across a machine crash, only across a process
// kill, which fsync does not change).
//
// It has no PostgreSQL client dependency: readiness is pg_isready.
//
// When the binaries are missing the test is skipped with a message, unless
// the environment variable CI is "true", where it fails: CI must install
// Debian's postgresql.
package pgserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
	"example.com/dlock/internal/testcert"
)

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 60 * time.Second

// binDirs are searched, in order, after PATH.
var binDirs = []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"}

// Find returns the path of the PostgreSQL program name (postgres, initdb,
// pg_isready), or "" if there is none.
func Find(name string) string {
	for _, d := range binDirs {
		if p := filepath.Join(d, name); proc.FileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// Required reports whether missing binaries fail tests (CI=true) rather
// than skip them.
func Required() bool { return proc.Required() }

// Server is one PostgreSQL server (the postmaster and its backends, one
// process group).
type Server struct {
	// Port is the loopback TCP port the server listens on.
	Port int
	// Dir is the temporary directory holding data/ and the socket.
	Dir string

	bins map[string]string
	cred *syscall.Credential
	tls  bool // serve TLS only (StartTLS): tls.crt, tls.key in Dir

	run proc.Handle // the running process and its log
}

// Start starts a server for t, fails the test (with the server's log) if it
// does not accept connections in time, and kills it and removes its
// directory when the test ends. It skips the test when PostgreSQL is not
// installed (fails under CI=true).
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch(binaries(t))
	return proc.Launched(t, "pgserver", s, err, (*Server).Remove)
}

// binaries finds postgres, initdb and pg_isready, or skips t (fails it
// under CI=true) when one is missing.
func binaries(t testing.TB) map[string]string {
	t.Helper()
	bins := map[string]string{}
	for _, name := range []string{"postgres", "initdb", "pg_isready"} {
		if bins[name] = Find(name); bins[name] == "" {
			proc.Missing(t, "pgserver: "+name+" not found", "Debian's postgresql")
		}
	}
	return bins
}

// StartTLS is Start for a server that takes TCP connections over TLS only,
// with set's server certificate (pg_hba.conf: hostssl only; the unix
// socket stays open for the harness).
func StartTLS(t testing.TB, set *testcert.Set) *Server {
	t.Helper()
	s, err := launch(binaries(t), set)
	return proc.Launched(t, "pgserver", s, err, (*Server).Remove)
}

// Launch makes a cluster with initdb in a new temporary directory and
// starts it with the programs in bins (postgres, initdb, pg_isready: full
// paths). On error the server's log is in the error. The caller must call
// Remove (also after an error, when the server is not nil).
func Launch(bins map[string]string) (*Server, error) { return launch(bins, nil) }

func launch(bins map[string]string, set *testcert.Set) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bins: bins}
	if os.Geteuid() == 0 {
		if s.cred, err = PostgresUser(); err != nil {
			return s, err
		}
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return s, err
		}
	}
	if err := s.initdb(); err != nil {
		return s, err
	}
	if set != nil {
		if err := s.serveTLS(set); err != nil {
			return s, err
		}
	}
	port, err := proc.FreePort()
	if err != nil {
		return s, err
	}
	s.Port = port
	if err := s.start(); err != nil {
		return s, err
	}
	if err := s.WaitReady(startTimeout); err != nil {
		return s, fmt.Errorf("%w\n--- server log:\n%s", err, proc.Tail(s.Log(), 4000))
	}
	return s, nil
}

// PostgresUser returns the credentials of Debian's unprivileged user
// "postgres", whom the server (and internal/pgbouncer's bouncer) runs as
// when we are root.
func PostgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the user postgres (Debian's postgresql creates it): %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(s.bins[name], args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

func (s *Server) initdb() error {
	cmd := s.command("initdb", "-D", s.dataDir(), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, proc.Tail(string(out), 4000))
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir, "data") }

// SocketDir is the directory of the server's unix socket.
func (s *Server) SocketDir() string { return s.Dir }

// Addr returns host:port of the server's TCP listener.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL returns a connection URL for the superuser on the database postgres
// over TCP, e.g. postgres://postgres@127.0.0.1:5433/postgres?sslmode=disable.
func (s *Server) URL() string {
	return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable"
}

// URLFor is URL with host:port replaced by addr (a fault proxy in front of
// the server).
func (s *Server) URLFor(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
}

// DSN returns the keyword/value connection string equivalent of URL.
func (s *Server) DSN() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", s.Port)
}

// Ready reports whether the server accepts connections (pg_isready), false
// on any error or when ctx ends first.
func (s *Server) Ready(ctx context.Context) bool {
	cmd := exec.CommandContext(ctx, s.bins["pg_isready"], "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "postgres", "-t", "2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd.Run() == nil
}

// WaitReady polls Ready until it reports true or timeout passes; it fails
// at once when the server is not running.
func (s *Server) WaitReady(timeout time.Duration) error {
	return proc.Poll(time.Now().Add(timeout), 50*time.Millisecond, func() error {
		if proc.Within(3*time.Second, s.Ready) {
			return nil
		}
		if !s.Running() {
			return proc.Final(fmt.Errorf("pgserver: server on port %d is not running", s.Port))
		}
		return fmt.Errorf("pgserver: server on port %d not ready by the deadline", s.Port)
	})
}

// serveTLS copies set's server certificate and key into the server's
// directory, owned by the server's user (PostgreSQL refuses a key others
// can read), and allows TCP connections over TLS only.
func (s *Server) serveTLS(set *testcert.Set) error {
	for src, dst := range map[string]string{set.ServerCert: "tls.crt", set.ServerKey: "tls.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		p := filepath.Join(s.Dir, dst)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
		if s.cred != nil {
			if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return err
			}
		}
	}
	hba := "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n"
	if err := os.WriteFile(filepath.Join(s.dataDir(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	s.tls = true
	if s.cred != nil {
		return os.Chown(filepath.Join(s.dataDir(), "pg_hba.conf"), int(s.cred.Uid), int(s.cred.Gid))
	}
	return nil
}
