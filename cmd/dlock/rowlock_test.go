package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/driver"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/pgserver"
)

// TestRowLockViaCapability: the demo's row lock is the SQL store's
// driver.RowLocker, found with driver.As on the lock store the inventory
// opens (no second pool), on both SQL stores. The warm-up holding
// rowLockWarm rows at once shows that the pool was sized by
// OpenHints.Conns (pgx's default is max(4, CPUs)); NOWAIT refuses the held
// row with ErrNotAcquired without running the function.
func TestRowLockViaCapability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and MariaDB")
	}
	for _, c := range []struct {
		name  string
		start func(testing.TB) string
	}{
		{"postgres", func(t testing.TB) string { return pgserver.Start(t).URL() }},
		{"mariadb", func(t testing.TB) string { return mysqlserver.Start(t).URL() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := withQuery(c.start(t), "migrate=true")
			if !hasRowLocker(store) {
				t.Fatalf("%s: no row lock found", c.name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st, err := openLockStore(ctx, &storeFlags{storeURL: store})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			rl, err := rowLockerOf(ctx, st, store)
			if err != nil || rl == nil {
				t.Fatalf("row locker: %v, %v", rl, err)
			}
			err = rl.WithRowLock(ctx, inventory.LockKey, func(c context.Context) error {
				inner := rl.WithRowLock(c, inventory.LockKey, func(context.Context) error {
					t.Error("the function ran on a row held by another transaction")
					return nil
				})
				if !errors.Is(inner, driver.ErrNotAcquired) {
					t.Errorf("a held row: %v, want ErrNotAcquired (NOWAIT)", inner)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRowLockAbsentElsewhere, the control: a store without
// driver.RowLocker (memstore here; Redis, etcd, ZooKeeper) has no row lock,
// and the demo refuses sql-for-update on it as a usage error naming the
// --store it needs, as it always did. An SQL URL is asked without a
// network call (nothing listens on port 1).
func TestRowLockAbsentElsewhere(t *testing.T) {
	for _, u := range []string{"redis://127.0.0.1:1", "mem://full", "etcd://127.0.0.1:1/locks", "zk://127.0.0.1:1/locks"} {
		if hasRowLocker(u) {
			t.Errorf("%s: a row lock", u)
		}
	}
	for _, u := range []string{"postgres://u:secret@127.0.0.1:1/app?sslmode=disable", "mysql://u:secret@127.0.0.1:1/app"} {
		if !hasRowLocker(u) {
			t.Errorf("%s: no row lock", u)
		}
	}
	st, err := (&storeFlags{storeURL: "mem://full"}).open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rl, err := rowLockerOf(context.Background(), st, "mem://full"); rl != nil || err != nil {
		t.Errorf("memstore's row locker: %v, %v; want none", rl, err)
	}
	for _, u := range []string{"redis://127.0.0.1:1", "mem://full"} {
		code, out, stderr := runCLI(t, "demo", "--strategies", inventory.SQLForUpdateStrategy, "--store", u)
		if code != ExitUsage || out != "" || !strings.Contains(stderr, "sql-for-update needs an SQL store: --store postgres://") {
			t.Errorf("%s: code %d, stdout %q, stderr %q", u, code, out, stderr)
		}
	}
}
