// Package testkit is the small helpers every package's tests share: a
// test's context, waiting for a condition with a deadline, waiting for a
// channel to close, and closing a Client when the test ends. It imports
// nothing of dlock, so that every package's tests can use it, internal/lease
// and the root package included. The store fault tests' scenarios (child
// processes, broken stores, the stock run) are in internal/faulttest.
//
// Waiting for a condition polls it: that is for conditions of the outside
// world (a server, another process) or of code with no signal to wait on.
// Timing logic is tested in a testing/synctest bubble instead, where these
// helpers still work (their timers run on the bubble's clock).
package testkit

import (
	"context"
	"testing"
	"time"
)

// Timeout is how long the context of Ctx lasts: far longer than any
// test's wait, so that it only ends a test that hangs.
const Timeout = 30 * time.Second

// Ctx returns a context that ends after Timeout or when the test ends.
func Ctx(t testing.TB) context.Context { return CtxFor(t, Timeout) }

// CtxFor returns a context that ends after d or when the test ends.
func CtxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually calls cond until it returns true or d has passed, and reports
// whether it did (it is called once more at the deadline). It polls every
// millisecond at first, then less often, up to every 20 ms.
func Eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for wait := time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, 20*time.Millisecond) {
		if cond() {
			return true
		}
		<-time.After(min(wait, time.Until(deadline)))
	}
	return cond()
}

// WaitFor fails the test unless cond returns true within d; what says
// what was waited for.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Eventually(d, cond) {
		t.Fatalf("%s: not within %v", what, d)
	}
}

// Closed fails the test unless ch is closed (or receives) within d.
func Closed(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch: // already closed: a select with a ready timer would pick at random
		return
	default:
	}
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// Closer is what CloseOnCleanup closes: a dlock.Client, for one.
type Closer interface {
	Close(ctx context.Context) error
}

// CloseOnCleanup closes c when the test ends, with 2 s for it, so that no
// background work of c (a Client's give-back of a lease whose release
// failed) outlives the test and its server.
func CloseOnCleanup(t testing.TB, c Closer) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
}
