package pgstore_test

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// Tests of the read-write lock table; its rules themselves are checked by
// the conformance suite (TestConformance/RWMutex/...).

var rwCountLine = regexp.MustCompile(`(?m)^(\s*o_mark := mark_end IS NOT NULL;)`)

// rwFunction returns the DDL of table's read-write lock acquisition
// function, changed by edit.
func rwFunction(t *testing.T, table string, edit func(string) string) string {
	t.Helper()
	ddl := pgstore.Schema(pgstore.Options{Table: table})
	i := strings.Index(ddl, "CREATE OR REPLACE FUNCTION "+table+"_rwlocks_acquire")
	j := i + strings.Index(ddl[max(i, 0):], "$fn$;")
	if i < 0 || j < i {
		t.Fatalf("no read-write lock acquisition function in the schema:\n%s", ddl)
	}
	f := edit(ddl[i : j+len("$fn$;")])
	if !strings.Contains(f, "pg_sleep") {
		t.Fatal("the function's count line was not found")
	}
	return f
}

// TestRWKeyLockSerializesAcquirers: 4 writers and 4 readers on 4 pools
// race for a fresh key, with the function widened by a 20 ms pause between
// its count and its write. The key's advisory lock admits one writer alone
// or readers alone in every round. Control: the same function without the
// lock admits a writer beside others, so the race is real and the count
// would see it.
func TestRWKeyLockSerializesAcquirers(t *testing.T) {
	for _, c := range []struct {
		name string
		lock bool
	}{{"WithKeyLock", true}, {"ControlWithoutKeyLock", false}} {
		t.Run(c.name, func(t *testing.T) {
			admin := newPool(t)
			table := uniqTable(t, admin)
			fn := rwFunction(t, table, func(f string) string {
				f = rwCountLine.ReplaceAllString(f, "    PERFORM pg_sleep(0.02);\n$1")
				if !c.lock {
					f = keyLockLine.ReplaceAllString(f, "")
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
			overlaps := 0
			for round := range 3 {
				w, r := rwRaceRound(t, stores, "k"+string(rune('a'+round)))
				t.Logf("round %d: %d writers and %d readers admitted", round, w, r)
				if w > 1 || (w == 1 && r > 0) {
					overlaps++
				}
			}
			switch {
			case c.lock && overlaps != 0:
				t.Fatalf("%d of 3 rounds admitted a writer beside another holder", overlaps)
			case !c.lock && overlaps == 0:
				t.Fatal("control: without the key lock no round admitted a writer beside another holder (the race did not happen)")
			}
		})
	}
}

// rwRaceRound starts 4 writers and 4 readers of key at once on stores and
// returns how many of each were admitted.
func rwRaceRound(t *testing.T, stores []*pgstore.Store, key string) (writers, readers int) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s := stores[i%len(stores)]
			acquire, count := s.AcquireRead, &readers
			if i%2 == 0 {
				acquire, count = s.AcquireWrite, &writers
			}
			_, err := acquire(ctx(t), key, tok(), time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				*count++
			case !errors.Is(err, driver.ErrNotAcquired):
				t.Errorf("acquire: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return writers, readers
}
