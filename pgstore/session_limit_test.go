package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/pgstore"
)

// TestSessionConnLimitIsUnavailable: with MaxConns 1 (no connection left
// for a wait), a queued wait behind another store's holder is refused at
// once with an error matching ErrConnLimit and driver.ErrUnavailable (a
// later attempt may succeed), and changes nothing: no waiter in the
// server's queue, no connection pinned or taken from the pool, the key
// still the holder's. Control: with MaxConns 2 the same wait pins a
// connection and queues, and the same observation sees it.
func TestSessionConnLimitIsUnavailable(t *testing.T) {
	url := sessServer(t).URL()
	for _, maxConns := range []int{1, 2} {
		t.Run(fmt.Sprint("MaxConns", maxConns), func(t *testing.T) {
			refused := maxConns == 1
			holder := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{})
			pool := sessPool(t, url, 3)
			s := newSession(t, pool, pgstore.SessionOptions{MaxConns: maxConns})
			key := t.Name()
			if _, err := holder.Acquire(tctx(t), key, "holder", time.Minute); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(tctx(t), 3*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := s.AcquireQueued(ctx, key, "waiter", time.Minute); done <- err }()
			queued := faulttest.Within(time.Second, func() bool { n, _ := holder.Waiters(tctx(t), key); return n > 0 })
			if queued == refused {
				t.Fatalf("a waiter in the server's queue: %v, want %v", queued, !refused)
			}
			if !refused {
				if n := s.Pinned(); n != 1 {
					t.Fatalf("control: the queued wait pins %d connections, want 1", n)
				}
				cancel()
				<-done
				return
			}
			err := <-done
			if !errors.Is(err, pgstore.ErrConnLimit) || !errors.Is(err, driver.ErrUnavailable) {
				t.Fatalf("queued wait at the limit: %v; want ErrConnLimit matching ErrUnavailable", err)
			}
			if n, out := s.Pinned(), pool.Stat().AcquiredConns(); n != 0 || out != 0 {
				t.Fatalf("after the refusal %d connections pinned, %d out of the pool; want none", n, out)
			}
			if _, err := holder.Extend(tctx(t), key, "holder", time.Minute); err != nil {
				t.Fatalf("the holder after the refusal: %v", err)
			}
		})
	}
}

// TestSessionLocksPerConn: with LocksPerConn 2 and MaxConns 2, four keys
// take two connections and a fifth is refused with ErrConnLimit (matching
// driver.ErrUnavailable), pinning nothing more and leaving the key free;
// after a release it is taken. Control: without LocksPerConn (no bound)
// the fifth key shares a connection.
func TestSessionLocksPerConn(t *testing.T) {
	url := sessServer(t).URL()
	for _, perConn := range []int{2, 0} {
		t.Run(fmt.Sprint("LocksPerConn", perConn), func(t *testing.T) {
			s := newSession(t, sessPool(t, url, 4), pgstore.SessionOptions{MaxConns: 2, LocksPerConn: perConn})
			other := newSession(t, sessPool(t, url, 2), pgstore.SessionOptions{})
			key := t.Name()
			for _, k := range []string{"a", "b", "c", "d"} {
				if _, err := s.Acquire(tctx(t), key+k, "t"+k, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Acquire(tctx(t), key+"e", "te", time.Minute)
			if perConn == 0 {
				if err != nil {
					t.Fatalf("control: a fifth key without a bound per connection: %v", err)
				}
				return
			}
			if !errors.Is(err, pgstore.ErrConnLimit) || !errors.Is(err, driver.ErrUnavailable) {
				t.Fatalf("fifth key: %v; want ErrConnLimit matching ErrUnavailable", err)
			}
			if n := s.Pinned(); n != 2 {
				t.Fatalf("%d connections pinned after the refusal, want 2", n)
			}
			if _, err := other.Acquire(tctx(t), key+"e", "x", time.Minute); err != nil {
				t.Fatalf("the refused key is not free: %v", err)
			}
			if err := other.Release(tctx(t), key+"e", "x"); err != nil {
				t.Fatal(err)
			}
			if err := s.Release(tctx(t), key+"a", "ta"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Acquire(tctx(t), key+"e", "te", time.Minute); err != nil {
				t.Fatalf("after a release: %v", err)
			}
		})
	}
}
