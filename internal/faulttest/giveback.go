package faulttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
)

// The give-back tests (issue 23, "Locks that stay held after they were
// given back"): a holding that ended without a confirmed release (a Release
// with an ended context, one lost in a network blip, a nested fixed lease
// that ran out) must be given back by the Client in the background. Each
// test then asks another Client, on a store client of its own (as another
// process would), to take the key: it must succeed within the test's
// stated bound.

// Freed is what WaitFree saw: whether another client took the key, how
// long after the start it did, how many attempts it made, and the key's
// state (Inspect) and the last refusal while it was still held.
type Freed struct {
	OK       bool
	After    time.Duration // from the start to the successful TryLock; the whole watch if !OK
	Attempts int
	Holder   string // the key's state as the store reported it at the last refusal
	LastErr  error  // the last refusal
}

// WaitFree has other try to take key every 20 ms from now until it
// succeeds or watch has passed since from (the moment the key should have
// started to be given back), or ctx ends. A successful holding is released
// at once. It changes nothing else and never fails the test: the caller
// compares Freed.After with its bound (watching past the bound measures
// how long a key that was not given back stayed held).
func WaitFree(ctx context.Context, other *dlock.Client, key string, from time.Time, watch time.Duration) Freed {
	var f Freed
	deadline := from.Add(watch)
	for {
		f.Attempts++
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		l, err := other.TryLock(actx, key)
		cancel()
		if err == nil {
			f.OK, f.After = true, time.Since(from)
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = l.Release(rctx)
			cancel()
			return f
		}
		f.LastErr = err
		f.Holder = Describe(ctx, other.Store(), key)
		if time.Now().After(deadline) || ctx.Err() != nil {
			f.After = time.Since(from)
			return f
		}
		time.Sleep(20 * time.Millisecond) // polling the store, bounded by watch
	}
}

// Describe returns key's state as the store reports it (driver.Inspector),
// for a failure message: held or free, the holder's token abbreviated, its
// hold count and fence.
func Describe(ctx context.Context, m driver.Mutex, key string) string {
	in, ok := driver.As[driver.Inspector](m)
	if !ok {
		return "(the store cannot inspect keys)"
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := in.Inspect(ictx, key)
	switch {
	case err != nil:
		return "inspect: " + err.Error()
	case !info.Held:
		return "free"
	}
	tok := info.Token
	if len(tok) > 8 {
		tok = tok[:8] + "…"
	}
	return fmt.Sprintf("held by token %q, %d hold(s), fence %d", tok, info.Holds, info.Fence)
}

// CheckGivenBack fails t unless other took key within bound of from
// (WaitFree watching for watch, at least bound). It logs a RESULT line
// either way: on a failing run, how long the key stayed held and what held
// it. what names the schedule for the messages.
func CheckGivenBack(t testing.TB, ctx context.Context, other *dlock.Client, key string, from time.Time, bound, watch time.Duration, what string) Freed {
	t.Helper()
	f := WaitFree(ctx, other, key, from, max(bound, watch))
	if f.OK {
		t.Logf("RESULT %s: another client took the key %v after (bound %v, %d attempts)", what, f.After.Round(time.Millisecond), bound, f.Attempts)
	} else {
		t.Logf("RESULT %s: the key was still held %v after (bound %v, %d attempts): %s; last TryLock: %v", what, f.After.Round(time.Millisecond), bound, f.Attempts, f.Holder, f.LastErr)
	}
	if !f.OK || f.After > bound {
		t.Fatalf("%s: another client could not take the key within %v (free after %v: %v; state: %s)", what, bound, f.After.Round(time.Millisecond), f.OK, f.Holder)
	}
	return f
}

// CheckReleaseEnded checks the error of a Release made with an ended
// context: it must match ErrUnavailable and the context's error (the
// release was handed to the Client's background give-back).
func CheckReleaseEnded(t testing.TB, err, ctxErr error) {
	t.Helper()
	if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, ctxErr) {
		t.Errorf("Release with an ended context: %v; want an error matching ErrUnavailable and %v", err, ctxErr)
	}
}

// The bounds of the give-back tests, from the moment the holding ended
// (Release returned, the blip ended, both Do calls returned, the lease was
// lost) to another client's successful TryLock. The Client gives a key
// back in the background at once, and retries a release that got no
// answer with a jittered backoff from 10 ms, doubling (its attempts come
// at most 10, 30, 70, 150, 310, 630 and 1270 ms after the first).
const (
	// GiveBackBound is the bound on a working store: one release round
	// trip, scheduled in the background, with slack for -race and a loaded
	// machine.
	GiveBackBound = time.Second
	// BlipGiveBackBound is the bound after a network blip, counted from
	// its end (the reset): the client reconnects within its session
	// (go-zookeeper waits about a second before it redials its only
	// server), and the first retry after that, at most 1.27 s after the
	// reset, frees the key.
	BlipGiveBackBound = 2 * time.Second
	// GiveBackWatch is how long a failing run keeps watching the key, to
	// report how long it stayed held (the old code's evidence).
	GiveBackWatch = 10 * time.Second
)

// ReleaseEnded is the schedule "Release with an already-ended context":
// holder locks key with ctx's values and opts under a request context that
// then ends (a request context under defer), and releases with it. The
// Release must return an error matching ErrUnavailable and
// context.Canceled, and other must take key within bound of the Release's
// return. holder holds another key, renewed, all along (see KeepSession).
func ReleaseEnded(t testing.TB, ctx context.Context, holder, other *dlock.Client, key string, bound time.Duration, opts ...dlock.Option) {
	t.Helper()
	defer KeepSession(t, ctx, holder, key)()
	req, cancel := context.WithCancel(ctx)
	l, err := holder.Lock(req, key, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel() // the request is over; its deferred Release runs now
	err = l.Release(req)
	from := time.Now()
	t.Logf("Release with the ended context: %v", err)
	CheckReleaseEnded(t, err, context.Canceled)
	CheckGivenBack(t, ctx, other, key, from, bound, GiveBackWatch, "Release with an ended context")
}

// NestedRunOut is the schedule Do(k){ Do(k, WithTTL(ttl)){ work ttl+0.5s } }
// on holder: the nested fixed lease runs out under the outer one (on a
// session store, ttl is the session TTL, as the nested lease lasts that
// long whatever WithTTL asks), then both return. other must take key
// within bound of the outer Do's return. holder holds another key,
// renewed, all along (see KeepSession).
func NestedRunOut(t testing.TB, ctx context.Context, holder, other *dlock.Client, key string, ttl, bound time.Duration) {
	t.Helper()
	defer KeepSession(t, ctx, holder, key)()
	err := holder.Do(ctx, key, func(ctx context.Context) error {
		return holder.Do(ctx, key, func(context.Context) error {
			work := time.NewTimer(ttl + 500*time.Millisecond) // the nested lease runs out: the point of the schedule
			defer work.Stop()
			<-work.C
			return nil
		}, dlock.WithTTL(ttl))
	})
	from := time.Now()
	t.Logf("Do(k){ Do(k, WithTTL(%v)){ work %v } } returned %v", ttl, ttl+500*time.Millisecond, err)
	CheckGivenBack(t, ctx, other, key, from, bound, GiveBackWatch, "nested fixed lease ran out")
}

// ReleaseBlip is the schedule "a release lost in a network blip": holder's
// store reaches its server only through p. holder holds another key,
// renewed all along (keeping its session alive), and key; the proxy then
// drops every request (upstream bytes) for blip while key is released,
// then resets every connection (the client reconnects within its
// session). The Release must fail (it got no answer); other must take key
// within bound of the reset, while the renewed lease is still held (a
// session that expired would free key for the wrong reason).
func ReleaseBlip(t testing.TB, ctx context.Context, holder, other *dlock.Client, p *faultproxy.Proxy, key string, blip, bound time.Duration) {
	t.Helper()
	defer KeepSession(t, ctx, holder, key)()
	l, err := holder.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(faultproxy.Upstream, true)
	done := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		done <- l.Release(rctx)
	}()
	cut := time.NewTimer(blip) // the blip's length: the fault under test
	<-cut.C
	p.Clear()
	p.ResetAll()
	from := time.Now()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Release did not return within 10 s of the reset")
	}
	t.Logf("Release during the blip: %v (returned %v after the reset)", err, time.Since(from).Round(time.Millisecond))
	if err == nil {
		t.Fatal("Release during the blip succeeded: its request was not lost, the test lost its premise")
	}
	CheckGivenBack(t, ctx, other, key, from, bound, GiveBackWatch, fmt.Sprintf("release lost in a %v blip", blip))
}

// KeepSession has holder lock key+"-renewed" (renewed automatically) for
// the length of a give-back schedule, as a process holding other locks
// would: on a session store its renewal keeps the session alive, so a key
// of that session is freed only if it is given back, not because the
// session ended (an etcd session nobody renews expires after its TTL and
// takes its keys with it). The returned function, deferred, checks that
// the renewed lease is still held (else the test lost its premise) and
// releases it.
func KeepSession(t testing.TB, ctx context.Context, holder *dlock.Client, key string) (check func()) {
	t.Helper()
	keep, err := holder.Lock(ctx, key+"-renewed")
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := keep.Err(); err != nil {
			t.Errorf("the renewed lease of the holder ended during the schedule (%v): the session may have ended and freed the key with it", err)
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := keep.Release(rctx); err != nil {
			t.Errorf("release of the renewed lease: %v", err)
		}
	}
}

// The controls of the give-back tests: the same measurement on a path
// that already gave keys back before issue 23 was fixed, to show that the
// bound can be met and that another client sees a freed key at once.

// PlainRunOut is the control of NestedRunOut: the same fixed lease, not
// nested (no Owner), runs out; the Client gives back a lost lease of its
// own token in the background. other must take key within bound of the
// lost lease's Release (which reports ErrLost).
func PlainRunOut(t testing.TB, ctx context.Context, holder, other *dlock.Client, key string, ttl, bound time.Duration) {
	t.Helper()
	defer KeepSession(t, ctx, holder, key)()
	l, err := holder.Lock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	work := time.NewTimer(ttl + 500*time.Millisecond) // the lease runs out: the point of the schedule
	<-work.C
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = l.Release(rctx)
	cancel()
	from := time.Now()
	if !errors.Is(err, dlock.ErrLost) {
		t.Errorf("Release of a fixed lease %v after it ran out: %v; want ErrLost", ttl+500*time.Millisecond, err)
	}
	CheckGivenBack(t, ctx, other, key, from, bound, GiveBackWatch, "plain fixed lease ran out (control)")
}

// ReleaseAfterBlip is the control of ReleaseBlip: the same blip and reset
// with the key held, then, once the holder's store answers again (Inspect
// through the holder's store client succeeds: it has reconnected), a
// Release with a live context. other must take key within bound of the
// reset: the bound leaves room for the reconnection.
func ReleaseAfterBlip(t testing.TB, ctx context.Context, holder, other *dlock.Client, p *faultproxy.Proxy, key string, blip, bound time.Duration) {
	t.Helper()
	defer KeepSession(t, ctx, holder, key)()
	l, err := holder.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(faultproxy.Upstream, true)
	cut := time.NewTimer(blip) // the blip's length: the fault under test
	<-cut.C
	p.Clear()
	p.ResetAll()
	from := time.Now()
	in, ok := driver.As[driver.Inspector](holder.Store())
	if !ok {
		t.Fatal("control: the holder's store cannot inspect keys, to tell when it has reconnected")
	}
	var ierr error
	if !Within(bound, func() bool {
		ictx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		_, ierr = in.Inspect(ictx, key)
		return ierr == nil
	}) {
		t.Fatalf("control: the holder's store did not answer within %v of the reset: %v", bound, ierr)
	}
	t.Logf("the holder's store answers again %v after the reset", time.Since(from).Round(time.Millisecond))
	rctx, cancel := context.WithTimeout(ctx, bound)
	err = l.Release(rctx)
	cancel()
	t.Logf("Release after the blip: %v (returned %v after the reset)", err, time.Since(from).Round(time.Millisecond))
	if err != nil {
		t.Errorf("Release after the blip: %v; want nil", err)
	}
	CheckGivenBack(t, ctx, other, key, from, bound, GiveBackWatch, "release after the blip (control)")
}

// RunOuts are NestedRunOut and its control PlainRunOut, as subtests.
var RunOuts = []struct {
	Name string
	Run  func(t testing.TB, ctx context.Context, holder, other *dlock.Client, key string, ttl, bound time.Duration)
}{{"nested", NestedRunOut}, {"control-plain", PlainRunOut}}

// Blips are ReleaseBlip and its control ReleaseAfterBlip, as subtests.
var Blips = []struct {
	Name string
	Run  func(t testing.TB, ctx context.Context, holder, other *dlock.Client, p *faultproxy.Proxy, key string, blip, bound time.Duration)
}{{"lost", ReleaseBlip}, {"control-release-after-blip", ReleaseAfterBlip}}

// ReleaseEndedThenClose is ReleaseEnded followed at once by holder.Close:
// Close waits for the background give-back, so once it returned nil the
// key is free: other's first TryLock must take it (no polling), though
// holder's store is still open (closing it would end its session and free
// the key for the wrong reason).
func ReleaseEndedThenClose(t testing.TB, ctx context.Context, holder, other *dlock.Client, key string, opts ...dlock.Option) {
	t.Helper()
	req, cancel := context.WithCancel(ctx)
	l, err := holder.Lock(req, key, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	err = l.Release(req)
	CheckReleaseEnded(t, err, context.Canceled)
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	start := time.Now()
	err = holder.Close(cctx)
	ccancel()
	t.Logf("Close after the Release with an ended context: %v, in %v", err, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Errorf("Close: %v; want nil (the give-back succeeded)", err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	defer tcancel()
	ol, err := other.TryLock(tctx, key)
	if err != nil {
		t.Fatalf("another client's TryLock right after Close returned: %v; want the key free (Close waits for the give-back); state: %s", err, Describe(ctx, other.Store(), key))
	}
	t.Log("RESULT another client took the key right after Close returned")
	_ = ol.Release(tctx)
}

// LostAcquire is the schedule "an acquisition whose reply was lost":
// holder's store reaches its server only through p, which delays every
// reply (downstream bytes) by 400 ms (within every session); holder locks
// key, and as soon as the server shows key held (the acquisition applied,
// its reply still on its way) the call's context ends, so Lock fails; the
// proxy then resets every connection (the late replies are lost) and
// lets bytes through again. With owner, Lock runs as an explicit Owner
// (ContextWithOwner) that holds nothing else: its last live holding has
// ended (it never had one), so whatever its token holds must be given
// back. Without, the call used a token of its own, which the Client gives
// back after a failed Lock. other must take key within bound of the
// reset. holder holds another key, renewed, all along (see KeepSession).
func LostAcquire(t testing.TB, ctx context.Context, holder, other *dlock.Client, p *faultproxy.Proxy, key string, owner bool, bound time.Duration, opts ...dlock.Option) {
	t.Helper()
	defer KeepSession(t, ctx, holder, key)()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if owner {
		lctx = dlock.ContextWithOwner(lctx, dlock.NewOwner())
	}
	p.SetDelay(faultproxy.Downstream, 400*time.Millisecond) // every reply late: the acquisition's reply is outstanding when the call ends, a few ms after it was applied
	type result struct {
		l   *dlock.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := holder.Lock(lctx, key, opts...)
		done <- result{l, err}
	}()
	var state string
	applied := Within(4*time.Second, func() bool {
		state = Describe(ctx, other.Store(), key)
		return strings.HasPrefix(state, "held")
	})
	cancel() // the caller gives up: the acquisition applied, its reply not yet in
	cancelled := time.Now()
	var r result
	select {
	case r = <-done:
		t.Logf("Lock returned %v after its context was cancelled", time.Since(cancelled).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		p.Clear()
		t.Fatal("Lock did not return within 10 s of its context's end")
	}
	p.Clear()
	p.ResetAll()
	from := time.Now()
	if r.err == nil {
		_ = r.l.Release(ctx)
		t.Fatal("Lock succeeded while its replies were delayed: the test lost its premise")
	}
	t.Logf("Lock with its replies delayed (owner %v): %v; the key when its context ended: %s", owner, r.err, state)
	if !applied {
		t.Fatalf("the key while Lock's replies were delayed: %s; want held (the request applied): the test lost its premise", state)
	}
	CheckGivenBack(t, ctx, other, key, from, bound, GiveBackWatch, fmt.Sprintf("acquisition whose reply was lost (explicit owner: %v)", owner))
}

// LateExtend is the schedule "a lease lost on the local clock while the
// store still holds it": holder's store reaches its server only through p
// and gives up on a reply after less than 400 ms (its client's read
// timeout, or ctx). holder takes key for ttl (a fixed lease, its own
// token) and extends it once to ttl; its Extend to 30 s is applied by the store, but the proxy delays
// the reply by 400 ms, so Extend fails with ErrUnavailable and the lease
// keeps its validity: it is lost on the local clock at about ttl while the
// store holds key for 30 s more. The Client must give the key back
// (token-checked): other must take it within bound of the loss (Done).
func LateExtend(t testing.TB, ctx context.Context, holder, other *dlock.Client, p *faultproxy.Proxy, key string, ttl, bound time.Duration) {
	t.Helper()
	defer KeepSession(t, ctx, holder, key)()
	l, err := holder.Lock(ctx, key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	// A first Extend, answered: the store's script or statement is then
	// loaded or prepared, so the faulty Extend is one round trip.
	if err := l.Extend(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(faultproxy.Downstream, 400*time.Millisecond) // the Extend's reply comes too late
	ectx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = l.Extend(ectx, 30*time.Second)
	cancel()
	p.Clear()
	p.ResetAll()
	if !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Extend with its reply delayed: %v; want ErrUnavailable (no answer): the test lost its premise", err)
	}
	var ce *dlock.ContendedError
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	ol, oerr := other.TryLock(tctx, key)
	tcancel()
	if ol != nil {
		_ = ol.Release(ctx)
	}
	if !errors.As(oerr, &ce) || ce.Remaining < ttl+time.Second {
		t.Fatalf("another client's TryLock after the Extend: %v; want the key held for about 30 s (the Extend applied): the test lost its premise", oerr)
	}
	t.Logf("Extend with its reply delayed: %v; the store holds the key for %v more", err, ce.Remaining.Round(time.Millisecond))
	select {
	case <-l.Done():
	case <-time.After(ttl + 5*time.Second):
		t.Fatalf("the lease was not lost %v after its TTL (%v) ran out: %v", 5*time.Second, ttl, l.Err())
	}
	from := time.Now()
	t.Logf("the lease ended: %v", l.Err())
	CheckGivenBack(t, ctx, other, key, from, bound, GiveBackWatch, "lease lost on the local clock, the store holding it 30 s")
}
