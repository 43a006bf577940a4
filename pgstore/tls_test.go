package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
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
		o, err := driver.Open(ctx, good+"&migrate=true&mode="+mode)
		if err != nil {
			t.Fatalf("%s over TLS: %v", mode, err)
		}
		c, err := dlock.New(o.Store)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Lock(ctx, "k")
		if err != nil {
			t.Fatalf("%s lock over TLS: %v", mode, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		_ = c.Close(ctx)
		_ = o.Close()
	}

	for name, u := range map[string]string{
		"sslmode=disable":   base + "sslmode=disable",
		"another authority": base + url.Values{"sslmode": {"verify-full"}, "sslrootcert": {other.CA}}.Encode(),
	} {
		if err := openAndLock(ctx, u); err == nil {
			t.Errorf("%s: locked on a server that takes TLS from its own authority only", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
}

// openAndLock opens rawURL (migrating) and takes and releases one lock.
func openAndLock(ctx context.Context, rawURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	o, err := driver.Open(ctx, rawURL+"&migrate=true")
	if err != nil {
		return err
	}
	defer o.Close()
	if _, err := o.Store.Acquire(ctx, "k2", "tok", time.Second); err != nil {
		return err
	}
	return o.Store.Release(ctx, "k2", "tok")
}
