package pgstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// doctor runs s's checks and returns them by name.
func doctor(t *testing.T, s *pgstore.Store) map[string]driver.Check {
	t.Helper()
	out := map[string]driver.Check{}
	for _, c := range s.Doctor(ctx(t), time.Second) {
		t.Logf("%-12s %d %s", c.Name, c.Status, c.Detail)
		out[c.Name] = c
	}
	return out
}

// poolWith returns a pool on the server whose connections set params.
func poolWith(t *testing.T, params map[string]string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestDoctor: on the test server every check is OK; a pool whose
// connections default to SERIALIZABLE gets a Warn on isolation, one that
// is read-only a Fail on writes (what a replica also gets), one through a
// TCP proxy a Warn on a pooler in front, and a store on a table never
// migrated a Fail on its probe lock.
func TestDoctor(t *testing.T) {
	pool := newPool(t)
	checks := doctor(t, newStore(t, pool, pgstore.Options{}))
	for _, name := range []string{"server", "primary", "isolation", "clock", "connections", "pooler", "notifications", "replication", "probe lock"} {
		if c, ok := checks[name]; !ok || c.Status != driver.OK {
			t.Errorf("check %q = %+v; want OK", name, c)
		}
	}
	table := uniqTable(t, pool)
	ser := doctor(t, newStore(t, poolWith(t, map[string]string{"default_transaction_isolation": "serializable"}), pgstore.Options{Table: table}))
	if ser["isolation"].Status != driver.Warn {
		t.Errorf("isolation under SERIALIZABLE = %+v; want Warn", ser["isolation"])
	}
	ro := doctor(t, newStore(t, poolWith(t, map[string]string{"default_transaction_read_only": "on"}), pgstore.Options{Table: table}))
	if ro["primary"].Status != driver.Fail || ro["probe lock"].Status != driver.Fail {
		t.Errorf("read-only: primary %+v, probe %+v; want both Fail", ro["primary"], ro["probe lock"])
	}
	p, err := faultproxy.New(server(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if c := doctor(t, newStore(t, newPool(t, p.Addr()), pgstore.Options{Table: table}))["pooler"]; c.Status != driver.Warn {
		t.Errorf("pooler through a proxy = %+v; want Warn", c)
	}
	s, err := pgstore.New(pool, pgstore.Options{Table: "never_migrated"})
	if err != nil {
		t.Fatal(err)
	}
	if c := doctor(t, s)["probe lock"]; c.Status != driver.Fail {
		t.Errorf("probe on a missing table = %+v; want Fail", c)
	}
}
