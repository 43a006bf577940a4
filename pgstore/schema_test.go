package pgstore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// TestMigrateIsIdempotentAndConcurrent runs Migrate from 6 goroutines at
// once on a fresh prefix, then again: no error, and the three objects of
// Schema exist. Control: before the migration they do not.
func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	pool := newPool(t)
	opts := pgstore.Options{Table: "mig_" + tok()[:8]}
	exists := func() int {
		var n int
		err := pool.QueryRow(ctx(t), `SELECT count(*) FROM pg_class WHERE relname IN ($1, $2, $3)`,
			opts.Table+"_locks", opts.Table+"_fence", opts.Table+"_rows").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := exists(); n != 0 {
		t.Fatalf("%d objects before the migration", n)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- pgstore.Migrate(ctx(t), pool, opts) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	if err := pgstore.Migrate(ctx(t), pool, opts); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if n := exists(); n != 3 {
		t.Fatalf("%d of the 3 objects after the migration", n)
	}
}

// TestSchemaIsWhatMigrateRuns runs Schema's DDL by hand (as a DBA would) on
// a fresh prefix, then locks through a store on it, and Migrate after it
// changes nothing. Schema names the prefix's objects and rejects nothing;
// New and Migrate reject a bad prefix with ErrInvalid.
func TestSchemaIsWhatMigrateRuns(t *testing.T) {
	pool := newPool(t)
	opts := pgstore.Options{Table: "ddl_" + tok()[:8]}
	ddl := pgstore.Schema(opts)
	for _, name := range []string{opts.Table + "_locks", opts.Table + "_fence", opts.Table + "_rows", opts.Table + "_rates", opts.Table + "_rates_allow", opts.Table + "_rwlocks", opts.Table + "_rwlocks_acquire"} {
		if !strings.Contains(ddl, name) {
			t.Fatalf("Schema does not name %s:\n%s", name, ddl)
		}
	}
	if _, err := pool.Exec(ctx(t), ddl); err != nil {
		t.Fatalf("running Schema's DDL: %v", err)
	}
	s := newStore(t, pool, opts)
	if _, err := s.Acquire(ctx(t), "k", tok(), 1e9); err != nil {
		t.Fatalf("Acquire on the hand-made schema: %v", err)
	}
	lim := driver.RateLimit{Rate: 1, Period: time.Second, Burst: 1}
	if r, err := s.AllowN(ctx(t), "k", lim, 1); err != nil || r.Allowed != 1 {
		t.Fatalf("AllowN on the hand-made schema: %+v, %v", r, err)
	}
	if _, err := newStore(t, pool, pgstore.Options{Table: "nothere_" + tok()[:8]}).AllowN(ctx(t), "k", lim, 1); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("AllowN without the schema: %v, want ErrRefused", err)
	}
	if err := pgstore.Migrate(ctx(t), pool, opts); err != nil {
		t.Fatalf("Migrate after the DDL: %v", err)
	}
	for _, bad := range []string{"Dlock", "1x", "a-b", "x;drop", strings.Repeat("a", 41)} {
		if err := pgstore.Migrate(ctx(t), pool, pgstore.Options{Table: bad}); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("Migrate(%q) = %v; want ErrInvalid", bad, err)
		}
		if _, err := pgstore.New(pool, pgstore.Options{Table: bad}); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("New(%q) = %v; want ErrInvalid", bad, err)
		}
	}
}
