package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/sqltest"
	"example.com/dlock/pgstore"
)

// Tests of the records table's begin function; the Idempotency rules
// themselves are checked by the conformance suite
// (TestConformance/Idempotency/...).

// beginFunction returns the DDL of table's begin function, changed by edit.
func beginFunction(t *testing.T, table string, edit func(string) string) string {
	t.Helper()
	ddl := pgstore.Schema(pgstore.Options{Table: table})
	i := strings.Index(ddl, "CREATE OR REPLACE FUNCTION "+table+"_idempotency_begin")
	j := i + strings.Index(ddl[max(i, 0):], "$fn$;")
	if i < 0 || j < i {
		t.Fatalf("no begin function in the schema:\n%s", ddl)
	}
	return edit(ddl[i : j+len("$fn$;")])
}

// TestRecordBeginLocksTheRow: 8 begins on 4 pools race to take over a
// record whose lease has passed, with the function widened by a 20 ms
// pause between its read and its decision. The row lock admits exactly one
// executor each round. Control: the same function reading without FOR
// UPDATE admits more (each read the passed lease before any took over).
func TestRecordBeginLocksTheRow(t *testing.T) {
	for _, c := range []struct {
		name string
		lock bool
	}{{"WithRowLock", true}, {"ControlWithoutRowLock", false}} {
		t.Run(c.name, func(t *testing.T) {
			admin := newPool(t)
			table := uniqTable(t, admin)
			fn := beginFunction(t, table, func(f string) string {
				f = strings.Replace(f, "    END LOOP;\n", "    END LOOP;\n    PERFORM pg_sleep(0.02);\n", 1)
				if !c.lock {
					f = strings.Replace(f, " FOR UPDATE;", ";", 1)
				}
				return f
			})
			if _, err := admin.Exec(ctx(t), fn); err != nil {
				t.Fatalf("replace the function: %v", err)
			}
			var stores []*pgstore.Store
			for range 4 {
				stores = append(stores, newStore(t, newPool(t), pgstore.Options{Table: table}))
			}
			most := 0
			for round := range 3 {
				key := "k" + string(rune('a'+round))
				// An in-flight record whose lease passed a second ago.
				if _, err := admin.Exec(ctx(t), "INSERT INTO "+table+"_idempotency (scope, key, owner, fence, fingerprint, done, lease_ends, keep_us, forget_at)"+
					" VALUES ('', $1, 'dead', nextval('"+table+"_fence'), 'fp', false, now() - interval '1 second', 3600000000, now() + interval '1 hour')", key); err != nil {
					t.Fatal(err)
				}
				most = max(most, beginRace(t, stores, key))
			}
			switch {
			case c.lock && most != 1:
				t.Fatalf("%d of 8 racing begins started an execution, want exactly 1", most)
			case !c.lock && most <= 1:
				t.Fatalf("control: without the row lock at most %d begins started; want more than 1 (the race did not happen)", most)
			}
		})
	}
}

// beginRace runs 8 BeginRecord of key at once over stores and returns how
// many started an execution.
func beginRace(t *testing.T, stores []*pgstore.Store, key string) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	started, start := 0, make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			<-start
			b, err := stores[i%len(stores)].BeginRecord(ctx(t), driver.RecordID{Key: key}, tok(), "fp", time.Minute, time.Hour)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("BeginRecord: %v", err)
			}
			if b.State == driver.RecordStarted {
				started++
			}
		})
	}
	close(start)
	wg.Wait()
	return started
}

// TestMigrateAddsTheTookColumn: a records table from before took (the
// column dropped here, with an in-flight record in it) gains the column
// from Migrate (twice: idempotent); the record's resent begin then starts
// it as before, with its fence, not as a takeover.
func TestMigrateAddsTheTookColumn(t *testing.T) {
	admin := newPool(t)
	table := uniqTable(t, admin)
	opts := pgstore.Options{Table: table}
	s := newStore(t, admin, opts)
	id := driver.RecordID{Key: "k"}
	first, err := s.BeginRecord(ctx(t), id, "a", "fp", time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx(t), "ALTER TABLE "+table+"_idempotency DROP COLUMN took"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := pgstore.Migrate(ctx(t), admin, opts); err != nil {
			t.Fatalf("Migrate %d: %v", i+1, err)
		}
	}
	again, err := s.BeginRecord(ctx(t), id, "a", "fp", time.Minute, time.Minute)
	if err != nil || again.State != driver.RecordStarted || again.Fence != first.Fence || again.TookOver {
		t.Fatalf("resent begin after Migrate = %+v, %v; want started, fence %d, not took over", again, err, first.Fence)
	}
}

// TestFoldedBeginNeedsMigrate: on a schema migrated before the folded
// begin's function existed (dropped here), pgguard.DoTx is refused
// (ErrRefused, saying to run Migrate) and runs nothing; after Migrate
// again it runs. Control: the two-step mode, which does not call that
// function, runs on the old schema.
func TestFoldedBeginNeedsMigrate(t *testing.T) {
	table := pgBackend{}.Table(t)
	admin := newPool(t)
	if _, err := admin.Exec(ctx(t), "DROP FUNCTION "+table+"_idempotency_begin_tx"); err != nil {
		t.Fatal(err)
	}
	g := pgBackend{}.Guard(t, table, sqltest.Sound)
	charge := func(c context.Context, tx sqltest.Tx, e dlock.Execution) ([]byte, error) {
		return []byte("ok"), tx.Charge(c, e.Key, e.Fence)
	}
	_, err := g.DoTx(ctx(t), "k", "fp", sqltest.Folded, charge)
	if !errors.Is(err, driver.ErrRefused) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("folded DoTx on an old schema: %v, want ErrRefused saying to run Migrate", err)
	}
	if _, err := g.DoTx(ctx(t), "two", "fp", sqltest.TwoStep, charge); err != nil {
		t.Fatalf("control: two-step DoTx on the old schema: %v", err)
	}
	if err := pgstore.Migrate(ctx(t), admin, pgstore.Options{Table: table}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.DoTx(ctx(t), "k", "fp", sqltest.Folded, charge); err != nil {
		t.Fatalf("folded DoTx after Migrate: %v", err)
	}
	if n := g.Charges(t, "k"); n != 1 {
		t.Fatalf("%d business rows, want 1 (none from the refused call)", n)
	}
}
