package pgbouncer

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/pgserver"
	"example.com/dlock/internal/proc"
)

// psql runs one statement through b with psql (on the database db) and
// returns its unaligned output.
func psql(t *testing.T, b *Bouncer, db, sql string) string {
	t.Helper()
	bin := pgserver.Find("psql")
	if bin == "" {
		t.Skip("psql not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-X", "-A", "-t", "-h", "127.0.0.1", "-p", strconv.Itoa(b.Port),
		"-U", "postgres", "-d", db, "-c", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s\n--- pgbouncer log:\n%s", sql, err, out, proc.Tail(b.Log(), 2000))
	}
	return strings.TrimSpace(string(out))
}

// TestModes starts a bouncer in each mode in front of one server and checks
// that it forwards queries to that server (a query answered by the bouncer
// itself, or by another server, has another port) and runs the pool mode
// asked for (the admin console's SHOW CONFIG): a harness that ignored
// Options.Mode fails here.
func TestModes(t *testing.T) {
	pg := pgserver.Start(t)
	for _, mode := range []Mode{Transaction, Session, Statement} {
		t.Run(string(mode), func(t *testing.T) {
			b := Start(t, pg, Options{Mode: mode})
			if b.Port == pg.Port {
				t.Fatalf("bouncer and server share port %d", b.Port)
			}
			if got := psql(t, b, "postgres", "SELECT inet_server_port()"); got != strconv.Itoa(pg.Port) {
				t.Fatalf("the server behind the bouncer listens on %q, want %d", got, pg.Port)
			}
			var poolMode string
			for line := range strings.SplitSeq(psql(t, b, "pgbouncer", "SHOW CONFIG"), "\n") {
				if f := strings.Split(line, "|"); len(f) >= 2 && f[0] == "pool_mode" {
					poolMode = f[1]
				}
			}
			if poolMode != string(mode) {
				t.Fatalf("pool_mode = %q, want %q", poolMode, mode)
			}
		})
	}
}

// TestLifecycle checks readiness before and after Kill, and that Remove
// removes the directory.
func TestLifecycle(t *testing.T) {
	pg := pgserver.Start(t)
	b := Start(t, pg, Options{})
	if !b.Running() || !proc.Within(5*time.Second, b.Ready) {
		t.Fatalf("started bouncer is not ready; log:\n%s", proc.Tail(b.Log(), 2000))
	}
	b.Kill()
	if b.Running() || proc.Within(time.Second, b.Ready) {
		t.Fatal("a killed bouncer still runs or answers")
	}
	b.Remove()
	if proc.FileExists(b.Dir + "/pgbouncer.ini") {
		t.Fatalf("Remove left %s", b.Dir)
	}
}

// TestRejectsMode checks that an unknown pool mode is refused before
// anything starts.
func TestRejectsMode(t *testing.T) {
	b, err := Launch("/nonexistent", "/nonexistent", 1, Options{Mode: "stmt"})
	if err == nil || b != nil {
		t.Fatalf("Launch with mode stmt = %v, %v; want an error and no bouncer", b, err)
	}
}
