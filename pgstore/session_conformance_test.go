package pgstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The drivertest conformance suite for the session store: each client has
// its own pool (as another process would) through one fault proxy, a 2 s
// check interval renewed by the suite through KeepAlive; Pause holds the
// proxy's bytes both ways (an outage that loses nothing); Kill closes the
// client's sockets as a crashed process's kernel would.
func TestSessionConformance(t *testing.T) {
	srv := sessServer(t)
	drivertest.Run(t, sessHarness(t, srv.Addr(), func(addr string) string { return srv.URLFor(addr) },
		"PostgreSQL frees a dead connection's advisory locks at once, not after a session TTL: "+
			"the case's 'still held right after the kill' does not hold (TestSessionKilledConnectionFreesAtOnce checks what does)"))
}

// sessHarness is the session store's conformance harness on the server at
// addr, reached through a fault proxy (urlFor gives the URL for the proxy's
// address); killed says why KilledSessionFreesItsKeys is skipped.
func sessHarness(t *testing.T, addr string, urlFor func(addr string) string, killed string) drivertest.Harness {
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	url := urlFor(p.Addr())
	return drivertest.Harness{
		New: func(t *testing.T) driver.Store {
			pool := sessPool(t, url, 8)
			return sessReporting{newSession(t, pool, pgstore.SessionOptions{CheckInterval: 2 * time.Second}), pool}
		},
		Pause: func(t *testing.T) func() {
			up, down := p.Hold(faultproxy.Upstream), p.Hold(faultproxy.Downstream)
			return func() { up(); down() }
		},
		Kill:  func(t *testing.T, s driver.Store) { s.(sessReporting).Abandon() },
		Slack: time.Second,
		Skip:  map[string]string{"KilledSessionFreesItsKeys": killed, "KilledSessionFreesItsHoldings": killed},
	}
}

// sessReporting lets the suite count what is kept for a key: the store's
// own entries (its map and the process registry) and the key's advisory
// locks in pg_locks, granted or awaited.
type sessReporting struct {
	*pgstore.SessionStore
	pool *pgxpool.Pool
}

func (r sessReporting) Retention() time.Duration { return 0 }

func (r sessReporting) KeyState(ctx context.Context, key string) (int, error) {
	n := r.LocalState(key)
	for _, id := range []int64{pgstore.LockID("dlock", key), pgstore.RWLockID("dlock", key), pgstore.RWMarkID("dlock", key)} {
		var c int
		u := uint64(id)
		err := r.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1`,
			uint32(u>>32), uint32(u)).Scan(&c)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}
