package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The session store's own properties on one server, beyond conformance.
func TestSession(t *testing.T) {
	srv := sessServer(t)
	url := srv.URL()
	t.Run("ManyLocksShareOnePinnedConnection", func(t *testing.T) { sessMultiplex(t, url) })
	t.Run("PoolLimitIsATypedErrorNotAHang", func(t *testing.T) { sessPoolLimit(t, url) })
	t.Run("InvalidOptions", func(t *testing.T) { sessInvalid(t, url) })
	t.Run("KilledConnectionFreesAtOnce", func(t *testing.T) { sessKilled(t, url) })
	t.Run("TerminatedBackendIsLostSignal", func(t *testing.T) { sessTerminated(t, url) })
	t.Run("CancelledWaitRacingAGrantLeavesNothing", func(t *testing.T) { sessCancelRace(t, url) })
	t.Run("ForeignAdvisoryLockExcludes", func(t *testing.T) { sessForeign(t, url) })
	t.Run("CloseEndsQueuedWaitsAndGivesConnectionsBack", func(t *testing.T) { sessCloseWaits(t, url) })
}

func sessCloseWaits(t *testing.T, url string) {
	holder := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	pool := sessPool(t, url, 8)
	s, err := pgstore.NewSession(pool, pgstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := t.Name()
	if _, err := holder.Acquire(tctx(t), key, "h", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(tctx(t), key+"/mine", "m", time.Minute); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.AcquireQueued(tctx(t), key, "w", time.Minute); done <- err }()
	if !faulttest.Within(10*time.Second, func() bool { n, _ := holder.Waiters(tctx(t), key); return n == 1 }) {
		t.Fatal("the waiter never queued")
	}
	if err := s.Close(tctx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, driver.ErrInvalid) {
			t.Fatalf("a queued wait ended by Close: %v, want ErrInvalid (closed)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close left a queued wait running")
	}
	if !faulttest.Within(5*time.Second, func() bool { return pool.Stat().AcquiredConns() == 0 }) {
		t.Fatalf("%d connections still out of the pool after Close", pool.Stat().AcquiredConns())
	}
	if _, err := holder.Acquire(tctx(t), key+"/mine", "x", time.Minute); err != nil {
		t.Fatalf("a key of the closed store is still held: %v", err)
	}
}

func sessMultiplex(t *testing.T, url string) {
	pool := sessPool(t, url, 4)
	s := newSession(t, pool, pgstore.SessionOptions{MaxConns: 1})
	other := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	const n = 50
	toks := make([]string, n)
	for i := range n {
		toks[i] = fmt.Sprint("tok", i)
		if _, err := s.Acquire(tctx(t), fmt.Sprint(t.Name(), i), toks[i], time.Minute); err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
	}
	if got := s.Pinned(); got != 1 {
		t.Fatalf("%d locks pin %d connections, want 1", n, got)
	}
	for i := range n {
		if _, err := other.Acquire(tctx(t), fmt.Sprint(t.Name(), i), "x", time.Minute); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("key %d held through a shared connection: another store got %v", i, err)
		}
	}
	for i := range n {
		if err := s.Release(tctx(t), fmt.Sprint(t.Name(), i), toks[i]); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
	if got := s.Pinned(); got != 0 {
		t.Fatalf("after every release %d connections stay pinned, want 0", got)
	}
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Fatalf("after every release the pool has %d connections out", st.AcquiredConns())
	}
}

func sessPoolLimit(t *testing.T, url string) {
	pool := sessPool(t, url, 2)
	s := newSession(t, pool, pgstore.SessionOptions{ConnWait: 200 * time.Millisecond}) // MaxConns: 1
	// A queued wait needs a connection of its own, beyond the one kept for
	// holdings: at the store's limit it fails at once.
	other := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	key := t.Name()
	if _, err := other.Acquire(tctx(t), key, "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := s.AcquireQueued(tctx(t), key, "waiter", time.Minute)
	if !errors.Is(err, pgstore.ErrConnLimit) || !errors.Is(err, driver.ErrUnavailable) || time.Since(start) > 5*time.Second {
		t.Fatalf("queued wait at the connection limit: %v after %v; want ErrConnLimit at once", err, time.Since(start))
	}
	// The application takes every connection of the pool: the store's
	// next connection fails with ErrPoolExhausted after ConnWait.
	var conns []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	start = time.Now()
	_, err = s.Acquire(tctx(t), key+"/2", "tok", time.Minute)
	el := time.Since(start)
	if !errors.Is(err, pgstore.ErrPoolExhausted) || !errors.Is(err, driver.ErrUnavailable) || el > 5*time.Second {
		t.Fatalf("Acquire on an exhausted pool: %v after %v; want ErrPoolExhausted after about 200ms", err, el)
	}
	for _, c := range conns {
		c.Release()
	}
	if _, err := s.Acquire(tctx(t), key+"/2", "tok", time.Minute); err != nil {
		t.Fatalf("Acquire once the pool has room: %v", err)
	}
	// Holding, the store pins one connection and leaves the other.
	c, err := pool.Acquire(tctx(t))
	if err != nil {
		t.Fatalf("the application cannot get its connection while the store holds a lock: %v", err)
	}
	c.Release()
}

func sessInvalid(t *testing.T, url string) {
	pool := sessPool(t, url, 2)
	for name, o := range map[string]pgstore.SessionOptions{
		"MaxConns = pool's": {MaxConns: 2},
		"negative MaxConns": {MaxConns: -1},
		"short interval":    {CheckInterval: time.Millisecond},
		"bad table":         {Table: "a-b"},
	} {
		if _, err := pgstore.NewSession(pool, o); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := pgstore.NewSession(nil, pgstore.SessionOptions{}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("nil pool: %v", err)
	}
	s := newSession(t, pool, pgstore.SessionOptions{Table: "nosuch"})
	if _, err := s.Acquire(tctx(t), "k", "t", time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("Acquire without the fence sequence: %v, want ErrRefused", err)
	}
	if _, err := s.Acquire(tctx(t), "k", "t", time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("second Acquire without the fence sequence: %v, want ErrRefused (the failed statement left no lock)", err)
	}
	other := newSession(t, pool, pgstore.SessionOptions{Table: "nosuch", MaxConns: 1})
	if free, err := other.Waiters(tctx(t), "k"); err != nil || free != 0 {
		t.Errorf("Waiters: %d, %v", free, err)
	}
}

// sessKilled: the server frees a dead connection's locks at once (what the
// conformance case KilledSessionFreesItsKeys, written for session TTLs,
// cannot check), and the killed store reports the holding lost.
func sessKilled(t *testing.T, url string) {
	s := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	other := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	key := t.Name()
	g, err := s.Acquire(tctx(t), key, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.Abandon()
	var g2 driver.Grant
	if !faulttest.Within(5*time.Second, func() bool { g2, err = other.Acquire(tctx(t), key, "b", time.Minute); return err == nil }) {
		t.Fatalf("key still held 5s after its connection died: %v", err)
	}
	if g2.Fence <= g.Fence {
		t.Fatalf("fence %d after %d", g2.Fence, g.Fence)
	}
	if _, err := s.Extend(tctx(t), key, "a", time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend of a dead connection's holding: %v, want ErrNotHeld", err)
	}
}

// sessTerminated: a dlock Lease on the session store is reported lost when
// its connection is ended by the server (pg_terminate_backend), through
// the Client's renewal (Extend); another owner then gets a greater fence.
func sessTerminated(t *testing.T, url string) {
	pool := sessPool(t, url, 4)
	s := newSession(t, pool, pgstore.SessionOptions{CheckInterval: 3 * time.Second}) // not less: a loaded machine must answer a check within it
	c, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	key := t.Name()
	l, err := c.Lock(tctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	admin := sessPool(t, url, 2)
	var n int
	if err := admin.QueryRow(tctx(t), `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
		AND classid = $1 AND objid = $2`, uint32(uint64(pgstore.LockID("dlock", key))>>32), uint32(uint64(pgstore.LockID("dlock", key)))).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate the holder's backend: %d, %v", n, err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was not reported lost 10s after its connection was terminated")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Lease.Err = %v, want ErrLost", err)
	}
	other := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	g, err := other.Acquire(tctx(t), key, "next", time.Minute)
	if err != nil || g.Fence <= l.Fence() {
		t.Fatalf("next holder: %+v, %v (previous fence %d)", g, err, l.Fence())
	}
}

// sessCancelRace: a queued waiter cancelled as the holder releases either
// returns the key (and holds it) or an error, and then leaves nothing: the
// key is free for a third store at once. Repeated with shifting timings.
func sessCancelRace(t *testing.T, url string) {
	holder := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	waiter := newSession(t, sessPool(t, url, 8), pgstore.SessionOptions{})
	third := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	granted := 0
	for i := range 20 {
		key := fmt.Sprint(t.Name(), i)
		if _, err := holder.Acquire(tctx(t), key, "h", time.Minute); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(tctx(t))
		done := make(chan error, 1)
		go func() { _, err := waiter.AcquireQueued(ctx, key, "w", time.Minute); done <- err }()
		if !faulttest.Within(10*time.Second, func() bool { n, _ := holder.Waiters(tctx(t), key); return n == 1 }) {
			t.Fatal("the waiter never queued")
		}
		time.AfterFunc(time.Duration(i%5)*200*time.Microsecond, cancel) // the race is the point
		if err := holder.Release(tctx(t), key, "h"); err != nil {
			t.Fatal(err)
		}
		err := <-done
		cancel()
		if err == nil {
			granted++
			if err := waiter.Release(tctx(t), key, "w"); err != nil {
				t.Fatalf("round %d: release the granted key: %v", i, err)
			}
		}
		if !faulttest.Within(5*time.Second, func() bool {
			_, err := third.Acquire(tctx(t), key, "t", time.Minute)
			return err == nil
		}) {
			t.Fatalf("round %d: the key is not free after the cancelled waiter (waiter's error %v)", i, err)
		}
	}
	t.Logf("%d of 20 waiters got the key before their cancel", granted)
}

// sessForeign: a program that is not dlock locks the key with
// pg_advisory_lock(LockID(table, key)) and excludes the store.
func sessForeign(t *testing.T, url string) {
	pool := sessPool(t, url, 4)
	key := t.Name()
	c, err := pool.Acquire(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(tctx(t), `SELECT pg_advisory_lock($1)`, pgstore.LockID("dlock", key)); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
	if _, err := s.Acquire(tctx(t), key, "x", time.Minute); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Acquire of a key a foreign program holds: %v", err)
	}
	if _, err := c.Exec(tctx(t), `SELECT pg_advisory_unlock($1)`, pgstore.LockID("dlock", key)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(tctx(t), key, "x", time.Minute); err != nil {
		t.Fatalf("Acquire after the foreign unlock: %v", err)
	}
}
