package sqlsession_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlsession"
)

// server is the engine tests' lock server: named locks owned by a
// connection id, freed when the connection is killed.
type server struct {
	mu     sync.Mutex
	locks  map[string]int
	fence  uint64
	stmts  int // statements run on pinned connections
	opened int
	freed  []string // Dialect.Freed calls
}

func (sv *server) do(f func()) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	f()
}

func newEngine(sv *server, recheck bool) *sqlsession.Engine[*fake, string] {
	pins := sqlsession.New(sqlsession.Config{
		MaxConns: 2, MaxWaiting: 1, Timeout: time.Second, ErrLimit: errLimit, ErrClosed: errClosed,
	}, sqlsession.Hooks[*fake]{
		Open: func(context.Context) (c *fake, err error) {
			sv.do(func() { sv.opened++; c = &fake{id: sv.opened} })
			return c, nil
		},
		Drop: func(*sqlsession.Conn[*fake]) {},
		Kill: func(p *sqlsession.Conn[*fake]) {
			sv.do(func() {
				p.C.killed = true
				for k, id := range sv.locks {
					if id == p.C.id {
						delete(sv.locks, k)
					}
				}
			})
		},
		Broken: func(c *fake, _ error) bool { return c.killed },
	})
	var eng *sqlsession.Engine[*fake, string]
	stmt := func(c *fake, f func()) (err error) {
		sv.do(func() {
			sv.stmts++
			if c.killed {
				err = errBroke
				return
			}
			f()
		})
		return err
	}
	eng = sqlsession.NewEngine(pins, sqlsession.Options{Name: "test", TTL: time.Second, CheckReentry: recheck, ErrClosed: errClosed},
		sqlsession.Dialect[*fake, string]{
			Lock: func(key string) string { return "L" + key },
			TryLock: func(ctx context.Context, p *sqlsession.Conn[*fake], _ string, name string) (uint64, bool, error) {
				v, err := eng.Pins.Run(ctx, p, func(_ context.Context, c *fake) (any, error) {
					var f uint64
					return f, stmt(c, func() {
						if sv.locks[name] == 0 {
							sv.locks[name] = c.id
							sv.fence++
							f = sv.fence
						}
					})
				}, nil)
				if err != nil {
					return 0, false, err
				}
				return v.(uint64), v.(uint64) > 0, nil
			},
			Check: func(_ context.Context, c *fake, name string) (mine, taken bool, err error) {
				err = stmt(c, func() { mine, taken = sv.locks[name] == c.id, sv.locks[name] != 0 })
				return mine, taken, err
			},
			Unlock: func(_ context.Context, c *fake, name string) (ok bool, err error) {
				err = stmt(c, func() {
					if ok = sv.locks[name] == c.id; ok {
						delete(sv.locks, name)
					}
				})
				return ok, err
			},
			Taken: func(_ context.Context, key string) (t bool, _ error) {
				sv.do(func() { t = sv.locks["L"+key] != 0 })
				return t, nil
			},
			Wrap:  func(op string, err error) error { return errors.Join(errors.New(op), err) },
			Freed: func(key string) { sv.freed = append(sv.freed, key) }, // under the engine's lock
		})
	return eng
}

func stmts(sv *server) (n int) {
	sv.do(func() { n = sv.stmts })
	return n
}

// TestEngineHolds: a re-entry and a release that is not the last are
// counted without a statement (CheckReentry off); another token contends
// and gets NotHeld(taken) on Release; the last release unlocks and the key
// is forgotten. Control: the same with CheckReentry costs a statement each.
func TestEngineHolds(t *testing.T) {
	for _, recheck := range []bool{false, true} {
		sv := &server{locks: map[string]int{}}
		e := newEngine(sv, recheck)
		ctx := context.Background()
		g, err := e.Acquire(ctx, "k", "a")
		if err != nil || g.Fence != 1 || g.Holds != 1 {
			t.Fatalf("acquire: %+v, %v", g, err)
		}
		n := stmts(sv)
		if g, err = e.Acquire(ctx, "k", "a"); err != nil || g.Holds != 2 {
			t.Fatalf("re-entry: %+v, %v", g, err)
		}
		if err := e.Release(ctx, "k", "a"); err != nil {
			t.Fatal(err)
		}
		if extra := stmts(sv) - n; recheck != (extra == 2) || !recheck && extra != 0 {
			t.Fatalf("CheckReentry %v: %d statements for a re-entry and a release", recheck, extra)
		}
		if _, err := e.Acquire(ctx, "k", "b"); !errors.Is(err, driver.ErrNotAcquired) {
			t.Fatalf("another token: %v, want contended", err)
		}
		if err := e.Release(ctx, "k", "b"); !errors.Is(err, driver.ErrTaken) {
			t.Fatalf("another token's release: %v, want NotHeld(taken)", err)
		}
		if err := e.Release(ctx, "k", "a"); err != nil || len(sv.locks) != 0 || e.Tracked("k") || e.Pins.Len() != 0 {
			t.Fatalf("last release: %v; server %v, tracked %v, %d pinned", err, sv.locks, e.Tracked("k"), e.Pins.Len())
		}
		if _, err := e.Extend(ctx, "k", "a"); !errors.Is(err, driver.ErrExpired) {
			t.Fatalf("extend after release: %v, want NotHeld(expired)", err)
		}
	}
}

// TestEngineLost: a holding whose connection died is lost (Extend says
// NotHeld, expired) and forgotten; one whose lock another session took is
// NotHeld(taken). Another token then gets the key on a new connection.
func TestEngineLost(t *testing.T) {
	sv := &server{locks: map[string]int{}}
	e := newEngine(sv, false)
	ctx := context.Background()
	if _, err := e.Acquire(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	e.Pins.Kill(e.Peek("k").P)
	if e.Peek("k") != nil {
		t.Fatal("a holding on a dead connection is still live")
	}
	if _, err := e.Extend(ctx, "k", "a"); !errors.Is(err, driver.ErrExpired) || e.Tracked("k") {
		t.Fatalf("extend on a dead connection: %v (tracked %v), want NotHeld(expired)", err, e.Tracked("k"))
	}
	if g, err := e.Acquire(ctx, "k", "b"); err != nil || g.Fence != 2 {
		t.Fatalf("another token after the loss: %+v, %v", g, err)
	}
	sv.do(func() { sv.locks["Lk"] = 99 }) // the server gave it to someone else
	if _, err := e.Extend(ctx, "k", "b"); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("extend of a lock taken elsewhere: %v, want NotHeld(taken)", err)
	}
	if e.Tracked("k") || len(sv.freed) != 2 {
		t.Fatalf("lost holdings not forgotten: tracked %v, freed %v", e.Tracked("k"), sv.freed)
	}
}

// TestEngineEndedContextAndClose: a release with an ended context sends
// nothing and keeps the holding; Close claims the connection, frees every
// key (Dialect.Freed) and later calls return ErrClosed.
func TestEngineEndedContextAndClose(t *testing.T) {
	sv := &server{locks: map[string]int{}}
	e := newEngine(sv, false)
	if _, err := e.Acquire(context.Background(), "k", "a"); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	n := stmts(sv)
	if err := e.Release(ended, "k", "a"); !errors.Is(err, context.Canceled) || stmts(sv) != n || e.Own("k", "a") == nil {
		t.Fatalf("release with an ended context: %v, %d statements, holding %v", err, stmts(sv)-n, e.Own("k", "a"))
	}
	claimed, first := e.Close()
	if len(claimed) != 1 || !first || e.Peek("k") != nil || len(sv.freed) != 1 {
		t.Fatalf("close: %d claimed, first %v, freed %v", len(claimed), first, sv.freed)
	}
	if _, again := e.Close(); again {
		t.Fatal("a second Close closed again")
	}
	if _, err := e.Acquire(context.Background(), "k2", "a"); !errors.Is(err, errClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
}
