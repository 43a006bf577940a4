// Package mysqlserver starts real MariaDB servers (Debian's mariadb-server
// 10.11: /usr/sbin/mariadbd and mariadb-install-db) for the tests of every
// module: one server per call on a free loopback port, with a data directory
// and a unix socket in a temporary directory, and stops, kills (-9),
// restarts and pauses it. The server is killed and its directory removed
// when the test ends (or, for a server made with Launch, when the caller
// calls Close).
//
// It has no SQL driver dependency (the root module gains none): it execs the
// binaries, and readiness is a TCP dial of the port followed by the server's
// greeting packet (protocol version 10). An init file creates the database
// "dlock" and the user "dlock" (password "dlock-test", every privilege) on
// every start; DSN and URL name them.
//
// Bootstrap (mariadb-install-db) takes about 1.6 s on the 2-core test
// machine and a start about 0.3 s when it is quiet, bootstrap and start
// together 10 s under a load average of 10: share one server per test
// package (TestMain with Launch) and give each test its own database or
// table prefix. As root the server runs with --user=root.
//
// When the binaries are missing the test is skipped with a message, unless
// the environment variable CI is "true", where it fails: CI must install
// mariadb-server.
package mysqlserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
	"example.com/dlock/internal/testcert"
)

// startTimeout bounds bootstrap and start.
const startTimeout = 60 * time.Second

// The credentials and database the init file creates.
const (
	User     = "dlock"
	Password = "dlock-test"
	Database = "dlock"
)

// Find returns the path of the binary name (looked up on PATH, then in
// /usr/sbin and /usr/bin, since /usr/sbin is often not on a user's PATH), or
// "" if there is none.
func Find(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin/", "/usr/bin/"} {
		if p := dir + name; proc.FileExists(p) {
			return p
		}
	}
	return ""
}

// Required reports whether missing binaries fail tests (CI=true) rather than
// skip them.
func Required() bool { return proc.Required() }

// Available reports whether mariadbd and mariadb-install-db are installed.
func Available() bool { return Find("mariadbd") != "" && Find("mariadb-install-db") != "" }

// requireBinaries skips (fails under CI=true) the test when a binary is
// missing.
func requireBinaries(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	proc.Missing(t, "mysqlserver: mariadbd or mariadb-install-db not found", "Debian's mariadb-server")
}

// Start bootstraps and starts a server in a temporary directory of t and
// kills it when the test ends. It skips like requireBinaries and fails the
// test on any other error, with the server's log.
func Start(t testing.TB) *Server {
	t.Helper()
	requireBinaries(t)
	s, err := Launch(t.TempDir())
	return proc.Launched(t, "mysqlserver", s, err, (*Server).Kill)
}

// StartTLS is Start for a server that serves TLS with set's server
// certificate and refuses connections without TLS
// (--require-secure-transport).
func StartTLS(t testing.TB, set *testcert.Set) *Server {
	t.Helper()
	requireBinaries(t)
	s, err := launch(t.TempDir(), set)
	return proc.Launched(t, "mysqlserver", s, err, (*Server).Kill)
}

// Launch bootstraps a data directory under dir and starts a server on it,
// for a TestMain that shares one server: the caller must call Kill (also
// after an error, when the server is not nil) and remove dir. It returns an
// error matching ErrMissing when the binaries are not installed.
func Launch(dir string) (*Server, error) { return launch(dir, nil) }

func launch(dir string, set *testcert.Set) (*Server, error) {
	if !Available() {
		return nil, ErrMissing
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		dir:  dir,
		port: port,
		bin:  Find("mariadbd"),
		tls:  set,
	}
	if err := s.bootstrap(); err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		return s, err
	}
	if err := s.waitReady(time.Now().Add(startTimeout)); err != nil {
		return s, fmt.Errorf("%w\n--- log:\n%s", err, proc.Tail(s.Log(), 4000))
	}
	return s, nil
}

// ErrMissing is returned by Launch when mariadbd or mariadb-install-db is
// not installed.
var ErrMissing = fmt.Errorf("mysqlserver: mariadbd or mariadb-install-db not found (install Debian's mariadb-server)")

// bootstrap runs mariadb-install-db into the data directory and writes the
// init file.
func (s *Server) bootstrap() error {
	// Temporary tables go to a directory of the server's own, not /tmp:
	// bootstraps running at once in /tmp once failed to delete their
	// "#sql-temptable-…" files (CI, with every store's suite at once).
	if err := os.MkdirAll(s.tmpDir(), 0o700); err != nil {
		return err
	}
	args := []string{
		"--no-defaults",
		"--datadir=" + s.dataDir(),
		"--tmpdir=" + s.tmpDir(),
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
		"--skip-name-resolve",
	}
	args = append(args, userArgs()...)
	out, err := exec.Command(Find("mariadb-install-db"), args...).CombinedOutput() //nolint:gosec // test binary
	if err != nil {
		return fmt.Errorf("mysqlserver: mariadb-install-db: %w\n%s", err, proc.Tail(string(out), 4000))
	}
	init := fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s;\n"+
		"CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s';\n"+
		"GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%' WITH GRANT OPTION;\n",
		Database, User, Password, User)
	return os.WriteFile(s.initFile(), []byte(init), 0o600)
}

func (s *Server) dataDir() string  { return filepath.Join(s.dir, "data") }
func (s *Server) initFile() string { return filepath.Join(s.dir, "init.sql") }
func (s *Server) tmpDir() string   { return filepath.Join(s.dir, "tmp") }

// Socket returns the path of the server's unix socket.
func (s *Server) Socket() string { return filepath.Join(s.dir, "mysqld.sock") }

// Addr returns the server's TCP address, 127.0.0.1:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// DSN returns a go-sql-driver/mysql DSN for the database "dlock" as the user
// "dlock", with parseTime=true, over TCP. params, if not empty, is appended
// to the query ("&a=b&c=d" or "a=b").
func (s *Server) DSN(params ...string) string {
	return DSNFor(s.Addr(), Database, params...)
}

// DSNFor returns the DSN DSN returns, for the address addr (a fault proxy in
// front of the server) and the database db.
func DSNFor(addr, db string, params ...string) string {
	q := "parseTime=true"
	for _, p := range params {
		if p != "" && p[0] != '&' {
			q += "&"
		}
		q += p
	}
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?%s", User, Password, addr, db, q)
}

// URL returns the mysql:// URL of the database "dlock" as the user "dlock".
func (s *Server) URL() string {
	return fmt.Sprintf("mysql://%s:%s@%s/%s", User, Password, s.Addr(), Database)
}

// userArgs runs the server as root when we are root (mariadbd refuses root
// without --user=root) and as ourselves otherwise.
func userArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}
