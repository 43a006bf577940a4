package mysqlstore_test

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// gated is the prototype of a GET_LOCK wake-up for the lease table, kept
// as a measurement (TestMeasureGate), not as a mode: the holder's store
// holds the named lock "gate:<key>" on a pinned connection for as long as
// the key is held through it (taken after a new holding, kept across
// Transfer, released with the last hold), and a waiter's Subscribe blocks
// in GET_LOCK on a pinned connection of its own, which the server grants
// when the holder lets the name go; it then lets it go at once and tells
// the Client. MariaDB pushes nothing to a client, so the holder must hold
// the name before any waiter blocks on it: it pins one connection per
// held key and pays two round trips per holding (GET_LOCK, RELEASE_LOCK),
// waited for or not.
type gated struct {
	*mysqlstore.Store
	db    *sql.DB
	mu    sync.Mutex
	holds map[string]int
	gates map[string]*sql.Conn
}

func newGated(s *mysqlstore.Store, db *sql.DB) *gated {
	return &gated{Store: s, db: db, holds: map[string]int{}, gates: map[string]*sql.Conn{}}
}

func (g *gated) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	gr, err := g.Store.Acquire(ctx, key, token, ttl)
	if err != nil {
		return gr, err
	}
	g.mu.Lock()
	g.holds[key] = gr.Holds
	_, have := g.gates[key]
	g.mu.Unlock()
	if !have {
		c, err := g.db.Conn(ctx)
		if err == nil {
			if _, err = c.ExecContext(ctx, "DO GET_LOCK(?, 0)", "gate:"+key); err == nil {
				g.mu.Lock()
				g.gates[key] = c
				g.mu.Unlock()
			} else {
				c.Close()
			}
		}
	}
	return gr, nil
}

func (g *gated) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	gr, err := g.Store.Transfer(ctx, key, from, to, ttl)
	if err == nil {
		g.mu.Lock()
		g.holds[key] = 1
		g.mu.Unlock()
	}
	return gr, err
}

func (g *gated) Release(ctx context.Context, key, token string) error {
	err := g.Store.Release(ctx, key, token)
	g.mu.Lock()
	g.holds[key]--
	var c *sql.Conn
	if g.holds[key] <= 0 {
		c = g.gates[key]
		delete(g.gates, key)
		delete(g.holds, key)
	}
	g.mu.Unlock()
	if c != nil {
		_, _ = c.ExecContext(ctx, "DO RELEASE_LOCK(?)", "gate:"+key)
		c.Close()
	}
	return err
}

// Subscribe blocks in GET_LOCK("gate:<key>", 1) in a loop on a pinned
// connection; each grant is let go at once and sent as a release. A grant
// that did not wait (nobody held the gate: the key is free, or its holder
// has not taken the gate yet) is followed by a 2 ms pause, so that the loop
// does not spin.
func (g *gated) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	c, err := g.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		for sctx.Err() == nil {
			start := time.Now()
			var got sql.NullInt64
			if err := c.QueryRowContext(sctx, "SELECT GET_LOCK(?, 1)", "gate:"+key).Scan(&got); err != nil {
				return
			}
			if got.Int64 != 1 {
				continue
			}
			if _, err := c.ExecContext(sctx, "DO RELEASE_LOCK(?)", "gate:"+key); err != nil {
				return
			}
			select {
			case ch <- struct{}{}:
			default:
			}
			if time.Since(start) < time.Millisecond {
				select {
				case <-sctx.Done():
				case <-time.After(2 * time.Millisecond):
				}
			}
		}
	}()
	return ch, func() { cancel(); <-done }, nil
}

// TestMeasureGate compares the lease table's wake-up through the Client's
// backoff (capped by the holder's remaining lease) with the GET_LOCK gate
// prototype (gated), and their throughput on one key, 2 clients × 25
// goroutines for 3 s, the two taking turns 3 times. It asserts only that
// every run made progress; the figures are the output. Run with
// DLOCK_MEASURE=1 (about 40 s).
func TestMeasureGate(t *testing.T) {
	if os.Getenv("DLOCK_MEASURE") == "" {
		t.Skip("set DLOCK_MEASURE=1 to measure")
	}
	_, opts := migrated(t, mysqlstore.Options{})
	mk := func(t *testing.T, gate bool) driver.Mutex {
		db := openDB(t, shared(t).DSN("interpolateParams=true"))
		s, err := mysqlstore.New(db, opts)
		if err != nil {
			t.Fatal(err)
		}
		if gate {
			return newGated(s, db)
		}
		return s
	}
	for round := range 3 {
		for _, gate := range []bool{round%2 == 1, round%2 == 0} {
			name := map[bool]string{false: "lease+backoff", true: "lease+GET_LOCK gate"}[gate]
			a, b := client(t, mk(t, gate)), client(t, mk(t, gate))
			lat := wakeups(t, a, b, 20)
			n := throughput(t, a, b, 25, 3*time.Second)
			t.Logf("round %d %s: wake-up p50 %v p90 %v max %v; one key 2x25 for 3s: %d sections (%.0f/s)",
				round+1, name, lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1], n, float64(n)/3)
		}
	}
}
