package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/testkit"
)

// A wrong address (a real closed port) is transient: Lock keeps
// trying for the wait bound, then says why, with the cause matchable.
// (Was the root package's TestL6WrongAddressNamesTheCause, review items L6
// and A6.)
func TestWrongAddressNamesTheCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	c, err := dlock.New(redisStore(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseOnCleanup(t, c)
	var tries atomic.Int64
	var firstErr atomic.Pointer[error]
	onRetry := dlock.WithOnRetry(func(_ int, err error) {
		if tries.Add(1) == 1 {
			firstErr.Store(&err)
		}
	})
	// The bound leaves room for a whole attempt on a loaded machine: with
	// 500 ms, the first attempt (about 400 ms of go-redis dials) was once cut
	// by the bound and reported the deadline instead of the refusal.
	const wait = 1500 * time.Millisecond
	start := time.Now()
	_, err = c.Lock(context.Background(), "k", dlock.WithWait(wait), onRetry)
	el := time.Since(start)
	t.Logf("after %v, %d retries: %v", el.Round(time.Millisecond), tries.Load(), err)
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a wrong address = %v, want ErrNotAcquired and ErrUnavailable, not DeadlineExceeded", err)
	}
	var opErr *net.OpError
	if !strings.Contains(err.Error(), "connection refused") || !errors.As(err, &opErr) {
		t.Fatalf("error %q does not carry the connection's cause", err)
	}
	// go-redis itself retries a failed dial (5 times, 100 ms apart), so
	// one attempt takes about 400 ms: one retry or more within the bound.
	if tries.Load() < 1 || el < wait || el > wait+3*time.Second {
		t.Fatalf("%d retries in %v, want at least one, ending about the %v bound", tries.Load(), el, wait)
	}
	if e := firstErr.Load(); e == nil || !errors.Is(*e, dlock.ErrUnavailable) {
		t.Fatal("OnRetry was not told of the unavailability")
	}
}
