package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/overlap"
	"example.com/dlock/internal/pgbouncer"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestBouncerLeaseTable: the lease table through PgBouncer in each pool
// mode (transaction, statement, session), the pool set as docs/postgres.md
// says (default_query_exec_mode=exec): every operation answers as on a
// direct connection (lock, re-entry, contention with the holder's
// remaining lease, extend, partial and last release, NotHeld(taken),
// Transfer; a fresh key takes the insert under pg_advisory_xact_lock, one
// statement), fences increase, the sweep deletes free rows (one statement:
// its row locks and advisory try-locks in one implicit transaction), and
// 2 Clients × 10 goroutines on one key never overlap, with fences in
// holding order.
func TestBouncerLeaseTable(t *testing.T) {
	for _, mode := range []pgbouncer.Mode{pgbouncer.Transaction, pgbouncer.Statement, pgbouncer.Session} {
		t.Run(string(mode), func(t *testing.T) { bouncerLeaseTable(t, bouncer(t, mode)) })
	}
}

func bouncerLeaseTable(t *testing.T, b *pgbouncer.Bouncer) {
	s := newStore(t, bouncedPool(t, b, 4), pgstore.Options{SweepInterval: -1})
	t.Run("Operations", func(t *testing.T) { leaseOperations(t, s) })
	t.Run("Sweep", func(t *testing.T) { leaseSweep(t, s) })
	t.Run("Overlap", func(t *testing.T) {
		rec := leaseOverlaps(t, b, s.Table(), 2, 10, 5)
		ws := rec.Windows()
		slices.SortFunc(ws, func(a, b overlap.Window) int { return a.From.Compare(b.From) })
		for i := 1; i < len(ws); i++ {
			if ws[i].Fence <= ws[i-1].Fence {
				t.Errorf("fence %d (%s) after %d (%s): out of holding order", ws[i].Fence, ws[i].Who, ws[i-1].Fence, ws[i-1].Who)
			}
		}
		if o := rec.Overlaps(); len(ws) != 2*10*5 || len(o) != 0 {
			t.Fatalf("%d critical sections (want 100), errors %v, overlaps %v", len(ws), rec.Errs(), o)
		}
	})
}

// leaseSweep takes and releases 5 fresh keys and holds a sixth, then
// sweeps s (a store that does not sweep by itself) through its pool: the
// sweep deletes the 5 free rows (at least: rows of earlier subtests may be
// free too), keeps the held one, and a second sweep finds nothing.
func leaseSweep(t *testing.T, s *pgstore.Store) {
	for i := range 5 {
		key, tk := fmt.Sprintf("sweep-%d", i), tok()
		if _, err := s.Acquire(ctx(t), key, tk, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx(t), key, tk); err != nil {
			t.Fatal(err)
		}
	}
	held := tok()
	if _, err := s.Acquire(ctx(t), "sweep-held", held, time.Minute); err != nil {
		t.Fatal(err)
	}
	n, err := s.Sweep(ctx(t))
	if err != nil || n < 5 {
		t.Fatalf("Sweep = %d, %v; want at least the 5 released rows", n, err)
	}
	if n, err := s.Sweep(ctx(t)); err != nil || n != 0 {
		t.Fatalf("a second Sweep = %d, %v; want 0", n, err)
	}
	if info, err := s.Inspect(ctx(t), "sweep-held"); err != nil || !info.Held {
		t.Fatalf("Inspect of the held key after the sweep = %+v, %v; want held", info, err)
	}
	if err := s.Release(ctx(t), "sweep-held", held); err != nil {
		t.Fatalf("Release of the held key after the sweep: %v", err)
	}
}

// leaseOperations drives one key of s through every operation and checks
// each answer.
func leaseOperations(t *testing.T, s *pgstore.Store) {
	a, b, c := tok(), tok(), tok()
	g1, err := s.Acquire(ctx(t), "k", a, 10*time.Second)
	if err != nil || g1.Holds != 1 || g1.Fence == 0 {
		t.Fatalf("Acquire = %+v, %v; want one hold and a fence", g1, err)
	}
	if g, err := s.Acquire(ctx(t), "k", a, 10*time.Second); err != nil || g.Holds != 2 || g.Fence != g1.Fence {
		t.Fatalf("re-entry = %+v, %v; want two holds, fence %d", g, err, g1.Fence)
	}
	var ce *driver.ContendedError
	if _, err := s.Acquire(ctx(t), "k", b, 10*time.Second); !errors.As(err, &ce) || ce.Remaining <= 0 || ce.Remaining > 10*time.Second {
		t.Fatalf("another owner's Acquire = %v; want ContendedError with the holder's remaining lease", err)
	}
	if g, err := s.Extend(ctx(t), "k", a, 20*time.Second); err != nil || g.Holds != 2 || g.Fence != g1.Fence {
		t.Fatalf("Extend = %+v, %v; want two holds, fence %d", g, err, g1.Fence)
	}
	if _, err := s.Acquire(ctx(t), "k", b, time.Second); !errors.As(err, &ce) || ce.Remaining <= 10*time.Second {
		t.Fatalf("after Extend another owner's Acquire = %v; want the extended lease (> 10s) remaining", err)
	}
	for i := range 2 {
		if err := s.Release(ctx(t), "k", a); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
	if err := s.Release(ctx(t), "k", a); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("a third Release = %v; want ErrNotHeld", err)
	}
	g2, err := s.Acquire(ctx(t), "k", b, 10*time.Second)
	if err != nil || g2.Fence <= g1.Fence {
		t.Fatalf("Acquire after the release = %+v, %v; want a fence above %d", g2, err, g1.Fence)
	}
	if err := s.Release(ctx(t), "k", a); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("the old owner's Release = %v; want NotHeld(taken)", err)
	}
	g3, err := s.Transfer(ctx(t), "k", b, c, 10*time.Second)
	if err != nil || g3.Fence <= g2.Fence || g3.Holds != 1 {
		t.Fatalf("Transfer = %+v, %v; want one hold and a fence above %d", g3, err, g2.Fence)
	}
	if _, err := s.Extend(ctx(t), "k", b, time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("the transferring owner's Extend = %v; want ErrNotHeld", err)
	}
	if err := s.Release(ctx(t), "k", c); err != nil {
		t.Fatalf("the new owner's Release: %v", err)
	}
}

// leaseOverlaps runs clients dlock Clients on stores of pools of their own
// through b (one table), goroutines each taking "hot" rounds times, and
// records their critical sections.
func leaseOverlaps(t *testing.T, b *pgbouncer.Bouncer, table string, clients, goroutines, rounds int) *overlap.Recorder {
	cs := make([]*dlock.Client, clients)
	for i := range cs {
		s := newStore(t, bouncedPool(t, b, int32(goroutines/2+2)), pgstore.Options{Table: table})
		c, err := dlock.New(s, dlock.WithTTL(10*time.Second), dlock.WithWait(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, c)
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		cs[i] = c
	}
	return hotSections(t, cs, goroutines, rounds, time.Millisecond)
}

// hotSections runs goroutines goroutines on each of clients, each taking
// the key "hot" rounds times for work (cut short if the lease ends), and
// records the critical sections.
func hotSections(t *testing.T, clients []*dlock.Client, goroutines, rounds int, work time.Duration) *overlap.Recorder {
	rec := &overlap.Recorder{}
	var wg sync.WaitGroup
	for i, c := range clients {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					l, err := c.Lock(ctx(t), "hot")
					if err != nil {
						rec.Fail(err)
						t.Errorf("Lock: %v", err)
						return
					}
					from := time.Now()
					select {
					case <-l.Done():
					case <-time.After(work): // the critical section's work
					}
					rec.Add(overlap.Window{Who: fmt.Sprintf("c%d/g%d", i, g), From: from, To: time.Now(), Fence: l.Fence(), Lost: l.Err() != nil})
					if err := l.Release(ctx(t)); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}()
		}
	}
	wg.Wait()
	return rec
}

// TestBouncerPoolMisconfigured: through PgBouncer 1.18 in transaction or
// statement mode a pool with pgx's default exec mode (named prepared
// statements, cached per client connection) fails once client connections
// run on each other's server backends: a statement prepared on one backend
// is missing on another (26000), or another client's of the same name is
// there (42P05). Two pools × 4 goroutines provoke it. The store says so
// with an error matching ErrRefused (the Client does not retry it) that
// names the setting to change; the pool set as the docs say works
// (TestBouncerLeaseTable).
func TestBouncerPoolMisconfigured(t *testing.T) {
	for _, mode := range []pgbouncer.Mode{pgbouncer.Transaction, pgbouncer.Statement} {
		t.Run(string(mode), func(t *testing.T) { poolMisconfigured(t, bouncer(t, mode)) })
	}
}

func poolMisconfigured(t *testing.T, b *pgbouncer.Bouncer) {
	table := uniqTable(t, newPool(t))
	var (
		mu   sync.Mutex
		errs []error
		ops  int
		wg   sync.WaitGroup
	)
	for p := range 2 {
		pool, err := pgxpool.New(context.Background(), b.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s := newStore(t, pool, pgstore.Options{Table: table})
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					key, tk := fmt.Sprintf("k%d-%d-%d", p, g, i), tok()
					_, err := s.Acquire(ctx(t), key, tk, time.Minute)
					if err == nil {
						err = s.Release(ctx(t), key, tk)
					}
					mu.Lock()
					ops++
					if err != nil {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(errs) == 0 {
		t.Fatalf("%d lock cycles with named prepared statements through %s pooling all worked: nothing to classify", ops, b.Mode)
	}
	for _, err := range errs {
		if !errors.Is(err, driver.ErrRefused) || !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
			t.Fatalf("a lock call through %s pooling with prepared statements = %v; want ErrRefused naming default_query_exec_mode=exec", b.Mode, err)
		}
	}
	t.Logf("%s pooling: %d of %d lock cycles failed; the first: %v", b.Mode, len(errs), ops, errs[0])
}

// TestBouncerRowLock: the row lock through PgBouncer in transaction mode
// (its lock and the protected write share one transaction, which PgBouncer
// keeps on one server backend) and in session mode (a client keeps its
// backend): two pools × counterWorkers goroutines × counterRounds
// read-pause-write increments lose none. Negative control, in each mode:
// the same increments in plain transactions, without FOR UPDATE, lose
// some. Statement mode refuses the transaction:
// TestBouncerStatementRowLock.
func TestBouncerRowLock(t *testing.T) {
	direct := newPool(t)
	sessMigrate(t, direct) // the default prefix's dlock_rows
	if _, err := direct.Exec(ctx(t), `CREATE TABLE IF NOT EXISTS rl_data (k text PRIMARY KEY, v int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, pm := range []pgbouncer.Mode{pgbouncer.Transaction, pgbouncer.Session} {
		t.Run(string(pm), func(t *testing.T) {
			url := bouncer(t, pm).URL() + "&default_query_exec_mode=exec"
			for _, mode := range []string{"rowlock", "none"} {
				bouncerCounter(t, direct, url, string(pm), mode)
			}
		})
	}
}

// bouncerCounter runs counterWork in mode from two pools to url at once on
// a counter of its own, and checks the total: none lost under the row lock,
// some lost without it.
func bouncerCounter(t *testing.T, direct *pgxpool.Pool, url, pm, mode string) {
	key := "bouncer-counter-" + pm + "-" + mode
	if _, err := direct.Exec(ctx(t), `INSERT INTO rl_data (k, v) VALUES ($1, 0) ON CONFLICT (k) DO UPDATE SET v = 0`, key); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- counterWork(url, mode, key) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("mode %s: %v", mode, err)
		}
	}
	var v int
	if err := direct.QueryRow(ctx(t), `SELECT v FROM rl_data WHERE k = $1`, key).Scan(&v); err != nil {
		t.Fatal(err)
	}
	total := 2 * counterWorkers * counterRounds
	t.Logf("mode %s through %s pooling: counter %d of %d increments", mode, pm, v, total)
	if mode == "rowlock" && v != total {
		t.Fatalf("lost updates under the row lock through %s pooling: %d of %d", pm, v, total)
	}
	if mode == "none" && v == total {
		t.Fatalf("negative control: without FOR UPDATE no update was lost (%d): the test cannot see lost updates", v)
	}
}
