package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestWakeLatency measures how long after a release a subscriber on
// another pool (another process, as far as the server can tell) is woken:
// from the start of the Release call (its round trip included) to the
// value on the channel. The issue asks for 5 ms at the median; the bound
// asserted here is looser (the machine is shared), the figure is logged.
func TestWakeLatency(t *testing.T) {
	holderPool, waiterPool := newPool(t), newPool(t)
	holder := newStore(t, holderPool, pgstore.Options{})
	waiter := newStore(t, waiterPool, pgstore.Options{Table: tableOf(t, holder)})
	const n = 60
	lat := make([]time.Duration, 0, n)
	ch, cancel, err := waiter.Subscribe(ctx(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	for i := range n {
		tk := tok()
		if _, err := holder.Acquire(ctx(t), "k", tk, time.Minute); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			t.Fatalf("round %d: woken by an acquisition", i)
		default:
		}
		contendAsWaiter(t, waiter, "k") // marks the holding: its release notifies
		start := time.Now()
		if err := holder.Release(ctx(t), "k", tk); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			lat = append(lat, time.Since(start))
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: no wake-up within 5s of the release", i)
		}
	}
	slices.Sort(lat)
	p50, p99 := lat[n/2], lat[n*99/100]
	t.Logf("wake-up after release (release round trip included), %d rounds: p50 %v, p99 %v, max %v", n, p50, p99, lat[n-1])
	if p50 > 50*time.Millisecond {
		t.Fatalf("median wake-up %v; want well under 50ms (the issue asks 5ms)", p50)
	}
}

// tableOf returns the prefix of s's table, from its schema.
func tableOf(t testing.TB, s *pgstore.Store) string { return s.Table() }

// listenerPID returns the backend pid of the connection that ran LISTEN for
// table, or 0.
func listenerPID(t *testing.T, admin *pgxpool.Pool, table string) int {
	t.Helper()
	var pid int
	err := admin.QueryRow(ctx(t), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE query = $1`,
		`LISTEN "`+table+`_locks"`).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestListenerReconnects kills the listener's connection on the server
// (pg_terminate_backend): the store reconnects, wakes its subscriber once
// it listens again (a release in between would have been lost), and later
// releases arrive on the new connection. Control: nothing woke the
// subscriber before the kill.
func TestListenerReconnects(t *testing.T) {
	admin := newPool(t)
	waiter := newStore(t, newPool(t), pgstore.Options{})
	holder := newStore(t, newPool(t), pgstore.Options{Table: waiter.Table()})
	ch, cancel, err := waiter.Subscribe(ctx(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	old := listenerPID(t, admin, waiter.Table())
	if old == 0 {
		t.Fatal("no backend runs the store's LISTEN")
	}
	select {
	case <-ch:
		t.Fatal("woken before anything happened")
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := admin.Exec(ctx(t), "SELECT pg_terminate_backend($1)", old); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber was not woken within 10s of its listener's connection dying")
	}
	if now := listenerPID(t, admin, waiter.Table()); now == 0 || now == old {
		t.Fatalf("listener backend after the kill: %d (was %d); want a new one", now, old)
	}
	tk := tok()
	if _, err := holder.Acquire(ctx(t), "k", tk, time.Minute); err != nil {
		t.Fatal(err)
	}
	contendAsWaiter(t, waiter, "k")
	if err := holder.Release(ctx(t), "k", tk); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("a release after the reconnection did not arrive")
	}
}

// TestSubscribeFailsWhenDown: with the server stopped, a first Subscribe
// returns an error (waiters then back off) instead of blocking, and after a
// restart subscriptions work again.
func TestSubscribeFailsWhenDown(t *testing.T) {
	srv := server(t)
	s := newStore(t, newPool(t), pgstore.Options{})
	srv.Stop(20 * time.Second)
	t.Cleanup(func() { _ = srv.Restart() })
	c, cancel := context.WithTimeout(ctx(t), 20*time.Second)
	defer cancel()
	if _, _, err := s.Subscribe(c, "k"); err == nil || c.Err() != nil {
		t.Fatalf("Subscribe with the server down = %v (ctx %v); want an error before the deadline", err, c.Err())
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var stop func()
		if _, stop, err = s.Subscribe(ctx(t), "k"); err == nil {
			stop()
			return
		}
	}
	t.Fatalf("Subscribe after the restart: %v", err)
}

// contendAsWaiter makes a contended Acquire of key on s, as a waiting Client does
// after it subscribes: the attempt marks the holding, so its release sends
// NOTIFY.
func contendAsWaiter(t *testing.T, s *pgstore.Store, key string) {
	t.Helper()
	var ce *driver.ContendedError
	if _, err := s.Acquire(ctx(t), key, tok(), time.Minute); !errors.As(err, &ce) {
		t.Fatalf("a waiter's Acquire of %q = %v; want ContendedError", key, err)
	}
}
