package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"example.com/dlock/internal/pgserver"
	"example.com/dlock/internal/redisserver"
)

// wantOneLine fails t unless r's stderr is a single "dlock: " line holding
// every string of want, with no tab.
func wantOneLine(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	line := strings.TrimSuffix(r.stderr, "\n")
	t.Logf("exit %d: %s", r.code, line)
	if r.code != code || !strings.HasPrefix(line, "dlock: ") || strings.ContainsAny(line, "\n\t") {
		t.Errorf("want exit %d and one line on stderr: %s", code, r)
		return
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("stderr lacks %q: %s", w, r)
		}
	}
}

// TestUnknownParameterOnEveryStore: a parameter the store does not take is
// a usage error (64) on every scheme, refused before any connection (the
// hosts do not exist) with one line naming it. On postgres:// it was sent
// to the server as a setting and reported as "cannot reach" (69).
func TestUnknownParameterOnEveryStore(t *testing.T) {
	for _, u := range []string{
		"postgres://u:pw@127.0.0.1:1/db?tabel=x",
		"postgresql://u:pw@127.0.0.1:1/db?tabel=x",
		"mysql://u:pw@127.0.0.1:1/db?tabel=x",
		"redis://127.0.0.1:1?tabel=x",
		"rediss://127.0.0.1:1?tabel=x",
		"redis+cluster://127.0.0.1:1,127.0.0.1:2?tabel=x",
		"redis+sentinel://127.0.0.1:1/m?tabel=x",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?tabel=x",
		"etcd://127.0.0.1:1?tabel=x",
		"etcds://127.0.0.1:1?tabel=x",
		"zk://127.0.0.1:1?tabel=x",
	} {
		r := runDlock(t, nil, "status", "--store", u, "k")
		wantOneLine(t, r, ExitUsage, `unknown parameter "tabel"`, "accepted: ")
	}
}

// TestRedisDatabaseOutOfRange: redis://…/99 on a server with 16 databases
// reaches the server, which refuses the number: 77 with one line naming
// the database number, never "cannot reach" (69). The control: /1 works.
func TestRedisDatabaseOutOfRange(t *testing.T) {
	srv := redisserver.Start(t)
	if r := runDlock(t, nil, "status", "--store", "redis://"+srv.Addr()+"/1", "k"); r.code != 0 {
		t.Fatalf("control /1: %s", r)
	}
	r := runDlock(t, nil, "status", "--store", "redis://"+srv.Addr()+"/99", "k")
	wantOneLine(t, r, ExitRefused, "database number")
	if strings.Contains(r.stderr, "cannot reach") {
		t.Errorf("a server that answered is not unreachable: %s", r)
	}
}

// TestBareHostPortStore: --store host:port means redis://host:port, as
// --redis takes it (Redis is the default store): status works. On the
// default port of another store it is a usage error (64) naming the URL
// to write; Go's "first path segment in URL cannot contain colon" is gone.
func TestBareHostPortStore(t *testing.T) {
	srv := redisserver.Start(t)
	if r := runDlock(t, nil, "status", "--store", srv.Addr(), "k"); r.code != 0 || !strings.Contains(r.stdout, "held:     no") {
		t.Fatalf("--store %s: %s", srv.Addr(), r)
	}
	r := runDlock(t, nil, "status", "--store", "127.0.0.1:5432", "k")
	wantOneLine(t, r, ExitUsage, "postgres://127.0.0.1:5432", "redis://127.0.0.1:5432")
	if strings.Contains(r.stderr, "first path segment") {
		t.Errorf("Go's URL parser error: %s", r)
	}
}

// TestRedlockDuplicateNodes: redlock://A,A,A counts one server three
// times; it is refused (64, one line) before the command runs. It was
// accepted: the command ran, then dlock exited 76.
func TestRedlockDuplicateNodes(t *testing.T) {
	srv := redisserver.Start(t)
	a := srv.Addr()
	ran := filepath.Join(t.TempDir(), "ran")
	r := runDlock(t, nil, "run", "--store", "redlock://"+a+","+a+","+a, "--key", "k", "--", "touch", ran)
	wantOneLine(t, r, ExitUsage, "same server "+a)
	if fileExists(ran) {
		t.Errorf("the command ran: %s", r)
	}
}

// TestPostgresWrongPassword: a password the server rejects is 77 with one
// line: the server's reason, without the refused TLS attempt of
// sslmode=prefer (pgx's default, listed first by pgx) and without the tabs
// pgx indents its attempts with. The control: the right password works.
func TestPostgresWrongPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a real PostgreSQL")
	}
	srv := pgserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	hba := filepath.Join(srv.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all locker 127.0.0.1/32 scram-sha-256\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE ROLE locker LOGIN PASSWORD 'right'", "SELECT pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	url := func(pw string) string { return "postgres://locker:" + pw + "@" + srv.Addr() + "/postgres" }
	// pg_reload_conf is asynchronous: wait until the wrong password is
	// refused to pgx itself; the right one must still connect.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := pgx.Connect(ctx, url("wrong"))
		if err != nil {
			break
		}
		_ = c.Close(ctx)
		if time.Now().After(deadline) {
			t.Fatal("the server still takes a wrong password")
		}
	}
	c, err := pgx.Connect(ctx, url("right"))
	if err != nil {
		t.Fatalf("control, the right password: %v", err)
	}
	_ = c.Close(ctx)
	r := runDlock(t, nil, "status", "--store", url("wrong"), "k")
	wantOneLine(t, r, ExitRefused, "password authentication failed")
	if strings.Contains(strings.ToLower(r.stderr), "tls") || strings.Contains(r.stderr, "wrong") {
		t.Errorf("TLS noise or the password: %s", r)
	}
}

// TestSchemelessStoreURL: the forms a bare --store takes, without a server.
func TestSchemelessStoreURL(t *testing.T) {
	for raw, want := range map[string]string{
		"h:6380":         "redis://h:6380",
		"u:pw@h:6380":    "redis://u:pw@h:6380",
		"[::1]:6379":     "redis://[::1]:6379",
		"redis://h:1":    "redis://h:1",
		"etcd://h:2379":  "etcd://h:2379",
		"h":              "h", // not host:port: driver.Open says what is wrong
		"h:1/0?prefix=x": "h:1/0?prefix=x",
	} {
		if got, err := schemeless(raw); err != nil || got != want {
			t.Errorf("schemeless(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	if _, err := schemeless("u:pw@h:2379"); err == nil || strings.Contains(err.Error(), "pw") || !strings.Contains(err.Error(), "etcd://h:2379") {
		t.Errorf("on etcd's port: %v; want the hint without the password", err)
	}
}
