// Package pgbouncer starts a real PgBouncer (Debian's pgbouncer, 1.18 in
// Debian 12, /usr/sbin/pgbouncer) in front of a PostgreSQL server of
// internal/pgserver, for the tests of the stores that must work behind a
// pooler: one bouncer per call on a free loopback port, with its
// configuration file, written here, in a fresh temporary directory. The
// bouncer is killed and its directory removed when the test ends.
//
// The bouncer trusts every client (auth_type = trust; the user must still be
// listed in auth_file, which lists "postgres") and connects to the server as
// the superuser "postgres", as pgserver's trust setup allows. Every database
// name is forwarded to the server's database of the same name.
//
// PgBouncer refuses to run as root ("should not run as root"), so when the
// test runs as root the bouncer runs as the unprivileged Debian user
// "postgres" (Debian's postgresql creates it; the directory is made its
// own), as pgserver's servers do.
//
// It has no PostgreSQL client dependency: readiness is pg_isready.
//
// When the binary is missing the test is skipped with a message, unless
// the environment variable CI is "true", where it fails: CI must install
// Debian's pgbouncer.
package pgbouncer

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/pgserver"
	"example.com/dlock/internal/proc"
)

// startTimeout bounds how long a bouncer may take to accept connections.
const startTimeout = 30 * time.Second

// binDirs are searched, in order, before PATH: Debian installs pgbouncer in
// /usr/sbin, which is not on every PATH.
var binDirs = []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin"}

// Find returns the path of the pgbouncer binary, or "" if there is none.
func Find() string {
	for _, d := range binDirs {
		if p := filepath.Join(d, "pgbouncer"); proc.FileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	return ""
}

// Mode is PgBouncer's pool_mode: when a server connection is given back to
// the pool.
type Mode string

const (
	// Session gives the server connection back when the client
	// disconnects: a client keeps one backend for its whole life.
	Session Mode = "session"
	// Transaction gives it back at the end of each transaction: a client's
	// next transaction may run on another backend, and session state (SET,
	// LISTEN, advisory locks, prepared statements) stays on the backend.
	Transaction Mode = "transaction"
	// Statement gives it back after each statement: a client's next
	// statement may run on another backend, and PgBouncer refuses
	// multi-statement transactions (it closes the client connection whose
	// statement left its backend inside a transaction, BEGIN included).
	Statement Mode = "statement"
)

// Options configure a bouncer.
type Options struct {
	// Mode is the pool mode (default Transaction).
	Mode Mode
	// PoolSize is default_pool_size: server connections per database and
	// user (default 20).
	PoolSize int
}

// Bouncer is one running PgBouncer in front of one PostgreSQL server.
type Bouncer struct {
	// Port is the loopback TCP port the bouncer listens on.
	Port int
	// Dir is the temporary directory holding the configuration.
	Dir string
	// Mode is the pool mode it runs in.
	Mode Mode

	bin, isready string
	cred         *syscall.Credential
	run          proc.Handle
}

// Start starts a bouncer in front of pg for t, fails the test (with the
// bouncer's log) if it does not accept connections in time, and kills it
// and removes its directory when the test ends. It skips the test when
// pgbouncer (or pg_isready) is not installed (fails under CI=true).
func Start(t testing.TB, pg *pgserver.Server, opts Options) *Bouncer {
	t.Helper()
	bin, isready := Find(), pgserver.Find("pg_isready")
	if bin == "" {
		proc.Missing(t, "pgbouncer: pgbouncer not found", "Debian's pgbouncer")
	}
	if isready == "" {
		proc.Missing(t, "pgbouncer: pg_isready not found", "Debian's postgresql")
	}
	b, err := Launch(bin, isready, pg.Port, opts)
	return proc.Launched(t, "pgbouncer", b, err, (*Bouncer).Remove)
}

// Launch starts a bouncer (bin: the pgbouncer binary, isready: pg_isready)
// in front of the server on loopback port pgPort, in a new temporary
// directory. On error the bouncer's log is in the error. The caller must
// call Remove (also after an error, when the bouncer is not nil).
func Launch(bin, isready string, pgPort int, opts Options) (*Bouncer, error) {
	if opts.Mode == "" {
		opts.Mode = Transaction
	}
	if opts.Mode != Session && opts.Mode != Transaction && opts.Mode != Statement {
		return nil, fmt.Errorf("pgbouncer: unknown mode %q", opts.Mode)
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = 20
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		return nil, err
	}
	b := &Bouncer{Dir: dir, Mode: opts.Mode, bin: bin, isready: isready}
	if os.Geteuid() == 0 {
		if b.cred, err = pgserver.PostgresUser(); err != nil {
			return b, err
		}
		if err := os.Chown(dir, int(b.cred.Uid), int(b.cred.Gid)); err != nil {
			return b, err
		}
	}
	if b.Port, err = proc.FreePort(); err != nil {
		return b, err
	}
	if err := b.writeConfig(pgPort, opts); err != nil {
		return b, err
	}
	if err := b.start(); err != nil {
		return b, err
	}
	if err := b.WaitReady(startTimeout); err != nil {
		return b, fmt.Errorf("%w\n--- pgbouncer log:\n%s", err, proc.Tail(b.Log(), 4000))
	}
	return b, nil
}

// config is pgbouncer.ini: %[1]d the server's port, %[2]d the bouncer's,
// %[3]s its directory, %[4]s the pool mode, %[5]d the pool size.
// unix_socket_dir is empty (no socket: loopback TCP only). The
// ignore_startup_parameters let clients that send extra_float_digits (JDBC,
// lib/pq) connect.
const config = `[databases]
* = host=127.0.0.1 port=%[1]d user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %[2]d
unix_socket_dir =
auth_type = trust
auth_file = %[3]s/userlist.txt
admin_users = postgres
pool_mode = %[4]s
default_pool_size = %[5]d
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
`

func (b *Bouncer) writeConfig(pgPort int, opts Options) error {
	files := map[string]string{
		"pgbouncer.ini": fmt.Sprintf(config, pgPort, b.Port, b.Dir, opts.Mode, opts.PoolSize),
		"userlist.txt":  `"postgres" ""` + "\n",
	}
	for name, text := range files {
		p := filepath.Join(b.Dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
		if b.cred != nil {
			if err := os.Chown(p, int(b.cred.Uid), int(b.cred.Gid)); err != nil {
				return err
			}
		}
	}
	return nil
}

// start runs the bouncer in the foreground, in its own process group, as
// the unprivileged user when we are root.
func (b *Bouncer) start() error {
	cmd := exec.Command(b.bin, filepath.Join(b.Dir, "pgbouncer.ini"))
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
	if err := b.run.Start(cmd, proc.Group); err != nil {
		return fmt.Errorf("start pgbouncer: %w", err)
	}
	return nil
}

// Addr returns host:port of the bouncer's TCP listener.
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port)) }

// URL returns a connection URL for the superuser on the database postgres
// through the bouncer, e.g.
// postgres://postgres@127.0.0.1:6432/postgres?sslmode=disable.
func (b *Bouncer) URL() string {
	return "postgres://postgres@" + b.Addr() + "/postgres?sslmode=disable"
}

// Ready reports whether the bouncer accepts connections (pg_isready), false
// on any error or when ctx ends first.
func (b *Bouncer) Ready(ctx context.Context) bool {
	cmd := exec.CommandContext(ctx, b.isready, "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(b.Port), "-U", "postgres", "-d", "postgres", "-t", "2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd.Run() == nil
}

// WaitReady polls Ready until it reports true or timeout passes; it fails
// at once when the bouncer is not running.
func (b *Bouncer) WaitReady(timeout time.Duration) error {
	return proc.Poll(time.Now().Add(timeout), 50*time.Millisecond, func() error {
		if proc.Within(3*time.Second, b.Ready) {
			return nil
		}
		if !b.Running() {
			return proc.Final(fmt.Errorf("pgbouncer: bouncer on port %d is not running", b.Port))
		}
		return fmt.Errorf("pgbouncer: bouncer on port %d not ready by the deadline", b.Port)
	})
}

// Running reports whether the bouncer was started and has neither exited
// nor been killed since.
func (b *Bouncer) Running() bool { return b.run.Held() && !b.run.Exited() }

// Kill kills the bouncer (SIGKILL to its process group) and waits for it to
// exit. Harmless if it is not running.
func (b *Bouncer) Kill() { b.run.Kill() }

// Restart kills the bouncer if it runs, starts it again on the same port
// with the same configuration, and waits until it accepts connections; on
// error the bouncer's log is in the error. Clients' connections to the
// killed bouncer are gone, and so are its server connections (PostgreSQL
// then ends their sessions).
func (b *Bouncer) Restart() error {
	b.Kill()
	if err := b.start(); err != nil {
		return err
	}
	if err := b.WaitReady(30 * time.Second); err != nil {
		return fmt.Errorf("%w\n--- bouncer log:\n%s", err, proc.Tail(b.Log(), 4000))
	}
	return nil
}

// Remove kills the bouncer and removes its directory.
func (b *Bouncer) Remove() {
	b.Kill()
	_ = os.RemoveAll(b.Dir)
}

// Log returns what the bouncer has written so far (bounded).
func (b *Bouncer) Log() string { return b.run.Log() }
