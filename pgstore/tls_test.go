package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/pgserver"
	"example.com/dlock/internal/testcert"
	"github.com/jackc/pgx/v5"
)

// TestOpenTLS: on a PostgreSQL that takes TCP connections over TLS only
// (pg_hba.conf: hostssl), a postgres:// URL with pgx's
// sslmode=verify-full&sslrootcert=CA locks in both modes, over an
// encrypted connection (pg_stat_ssl). The controls: sslmode=disable, and
// verify-full against another authority, are refused.
func TestOpenTLS(t *testing.T) {
	certs, other := testcert.ForTest(t), testcert.ForTest(t)
	srv := pgserver.StartTLS(t, certs)
	base := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?", srv.Port)
	good := base + url.Values{"sslmode": {"verify-full"}, "sslrootcert": {certs.CA}}.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	conn, err := pgx.Connect(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	var ssl bool
	if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Fatalf("the verify-full connection is not encrypted: %v, %v", ssl, err)
	}
	_ = conn.Close(ctx)

	for _, mode := range []string{"lease", "session"} {
		if err := faulttest.OpenAndLock(ctx, good+"&migrate=true&mode="+mode, "k"); err != nil {
			t.Fatalf("%s over TLS: %v", mode, err)
		}
	}

	for name, u := range map[string]string{
		"sslmode=disable":   base + "sslmode=disable",
		"another authority": base + url.Values{"sslmode": {"verify-full"}, "sslrootcert": {other.CA}}.Encode(),
	} {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := faulttest.OpenAndLock(octx, u+"&migrate=true", "k2")
		cancel()
		if err == nil {
			t.Errorf("%s: locked on a server that takes TLS from its own authority only", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
}
