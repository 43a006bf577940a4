package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// Released is the error of a lease that was released (it matches
// driver.ErrNotHeld): Err and a second release report it.
var Released = fmt.Errorf("%w: lease released", driver.ErrNotHeld)

// Holder is the primitive's side of a lease's end.
type Holder interface {
	// LostError returns the error the lease reports once lost with cause.
	LostError(cause error) error
	// Ended is called once, with the Validity's mutex held, when the lease
	// ends (released or lost). It must not call the Validity.
	Ended()
	// Lost is called once after a loss, without the mutex, before the loss
	// hooks run (the renewal and the local queue let go of the lease).
	Lost()
	// Expire must call the lease's Validity.Expire with this Holder: the
	// expiry timer calls it (a method value costs a smaller allocation per
	// timer than a closure over the Validity and the Holder).
	Expire()
}

// Validity is how long a lease is valid and the signal of its end: the
// expiry timer armed a margin before the end of the validity, the
// serialisation of the calls that set the lease's expiry in the store (so
// that the validity always follows the expiry applied last), the Done
// channel and the loss hooks. Call Init before use; it is safe for
// concurrent use afterwards.
type Validity[T Stopper] struct {
	mu    sync.Mutex
	clock Clock[T]
	// calling is set while a call that sets the expiry is under way.
	calling bool
	// freed is set once the ended lease's hold was given back to the store
	// (or the attempt made), so that releasing a lost lease twice sends one
	// release.
	freed bool
	// back is closed when a give-back claimed by ClaimGiveBack ends.
	back     chan struct{}
	nextHook int32
	callDone chan struct{} // made by a BeginCall waiting for the call under way
	done     chan struct{} // made on first use by Done; closed when the lease ends
	until    time.Time
	ttl      time.Duration // TTL of the expiry set last; renewal asks for it
	err      error         // nil while held
	expiry   T
	renewErr error // last failed renewal or extension, reported as the cause on expiry
	hooks    map[int32]func(error)
}

// Init sets the validity of a lease of ttl to until on clock and arms its
// expiry timer, which loses the lease through h.
func (v *Validity[T]) Init(clock Clock[T], until time.Time, ttl time.Duration, h Holder) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clock, v.until, v.ttl = clock, until, ttl
	v.arm(h)
}

// Margin is how long before the end of the validity the expiry timer is
// armed, so that Done is closed by then although a timer runs a little late:
// 5 ms, or a tenth of the TTL if that is less.
func Margin(ttl time.Duration) time.Duration {
	return min(5*time.Millisecond, ttl/10)
}

// arm (re)arms the expiry timer. Called with v.mu held.
func (v *Validity[T]) arm(h Holder) {
	if v.clock == nil {
		return
	}
	var zero T
	if any(v.expiry) != any(zero) {
		v.expiry.Stop()
	}
	d := v.until.Sub(v.clock.Now()) - Margin(v.ttl)
	v.expiry = v.clock.AfterFunc(d, h.Expire)
}

// stop stops the expiry timer. Called with v.mu held.
func (v *Validity[T]) stop() {
	var zero T
	if any(v.expiry) != any(zero) {
		v.expiry.Stop()
	}
}

// IfLive runs f with the mutex held if the lease has not ended, and reports
// whether it did. f must not call the Validity.
func (v *Validity[T]) IfLive(f func()) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return false
	}
	f()
	return true
}

// Done returns a channel closed when the lease ends.
func (v *Validity[T]) Done() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done == nil {
		if v.err != nil {
			return closedChan
		}
		v.done = make(chan struct{})
	}
	return v.done
}

// closedChan is the Done channel of a lease that ended before anyone asked.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// end marks the lease ended with err. Called with v.mu held, once.
func (v *Validity[T]) end(h Holder, err error) {
	v.err = err
	v.stop()
	if v.done != nil {
		close(v.done)
	}
	h.Ended()
}

// Err returns nil while the lease is held, else why it ended. A lease past
// its validity is lost now if its timer is late.
func (v *Validity[T]) Err(h Holder) error {
	v.mu.Lock()
	if v.err != nil || v.clock.Now().Before(v.until) {
		defer v.mu.Unlock()
		return v.err
	}
	v.mu.Unlock()
	v.Expire(h) // the timer is late, but the validity is over all the same
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// ValidUntil returns the end of the validity.
func (v *Validity[T]) ValidUntil() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.until
}

// Remaining returns how much validity is left, or zero once the lease ended.
func (v *Validity[T]) Remaining() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return 0
	}
	return max(0, v.until.Sub(v.clock.Now()))
}

// Current returns the TTL of the expiry set last, and whether the lease
// ended.
func (v *Validity[T]) Current() (ttl time.Duration, ended bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ttl, v.err != nil
}

// Release ends a held lease as released and returns nil; the caller then
// frees it in the store. A lease past its validity is lost first (a lease
// past its validity must not hand off). If the lease had ended already, it
// returns why, and first reports whether this is the first release of a
// lost lease (the caller then gives its hold back to the store, once);
// back, if not nil, is closed when a give-back claimed with ClaimGiveBack
// ends.
func (v *Validity[T]) Release(h Holder) (ended error, firstAfterLoss bool, back <-chan struct{}) {
	v.mu.Lock()
	if v.err == nil && !v.clock.Now().Before(v.until) {
		v.mu.Unlock()
		v.Expire(h) // the timer is late
		v.mu.Lock()
	}
	defer v.mu.Unlock()
	if v.err != nil {
		first := v.err != Released && !v.freed
		v.freed = true
		if v.back != nil {
			back = v.back
		}
		return v.err, first, back
	}
	v.end(h, Released)
	return nil, false, nil
}

// ClaimGiveBack claims the giving back of an ended lease's hold, unless a
// release of it claimed it first: it returns a channel to close once done,
// or nil.
func (v *Validity[T]) ClaimGiveBack() chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.freed {
		return nil
	}
	v.freed = true
	v.back = make(chan struct{})
	return v.back
}

// Expire loses the lease if its validity (less the margin) is over: the
// expiry timer calls it; an extension may have moved the validity since.
func (v *Validity[T]) Expire(h Holder) {
	v.mu.Lock()
	if v.err != nil || v.clock.Now().Before(v.until.Add(-Margin(v.ttl))) {
		v.mu.Unlock()
		return
	}
	cause := driver.ErrExpired
	if v.renewErr != nil {
		cause = fmt.Errorf("%w after renewal failed: %w", driver.ErrExpired, v.renewErr)
	}
	v.mu.Unlock()
	v.Lose(h, cause)
}

// Lose ends the lease with h.LostError(cause), calls h.Lost, runs the loss
// hooks and returns the error; if the lease had ended already, it returns
// why and does nothing else.
func (v *Validity[T]) Lose(h Holder, cause error) error {
	v.mu.Lock()
	if v.err != nil {
		defer v.mu.Unlock()
		return v.err
	}
	v.end(h, h.LostError(cause))
	hooks := v.hooks
	v.hooks = nil
	err := v.err
	v.mu.Unlock()
	h.Lost()
	for _, f := range hooks {
		f(err)
	}
	return err
}

// OnLost registers f to run once if the lease is lost (at once if it was
// lost already; never if it was released) and returns a function that
// unregisters it.
func (v *Validity[T]) OnLost(f func(error)) (stop func()) {
	v.mu.Lock()
	if v.err != nil {
		err := v.err
		v.mu.Unlock()
		if err != Released {
			f(err)
		}
		return func() {}
	}
	if v.hooks == nil {
		v.hooks = make(map[int32]func(error))
	}
	id := v.nextHook
	v.nextHook++
	v.hooks[id] = f
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		delete(v.hooks, id)
		v.mu.Unlock()
	}
}

// ErrCallWait is the cause BeginCall reports when ctx ended while it waited
// for the call under way.
var ErrCallWait = errors.New("waiting for the renewal under way")

// BeginCall waits until no call that sets the expiry is under way, then
// marks one. It returns the lease's error if the lease ended, or an error
// matching ErrCallWait and ctx's cause if ctx ended first.
func (v *Validity[T]) BeginCall(ctx context.Context) error {
	v.mu.Lock()
	for v.calling && v.err == nil {
		if v.callDone == nil {
			v.callDone = make(chan struct{}) // only when calls meet: rare
		}
		ch := v.callDone
		v.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrCallWait, context.Cause(ctx))
		}
		v.mu.Lock()
	}
	defer v.mu.Unlock()
	if v.err != nil {
		return v.err
	}
	v.calling = true
	return nil
}

// TryBeginCall marks a call under way, unless one is already or the lease
// ended; it reports whether it did, and the TTL and validity to renew with.
func (v *Validity[T]) TryBeginCall() (ttl time.Duration, until time.Time, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.calling || v.err != nil {
		return 0, time.Time{}, false
	}
	v.calling = true
	return v.ttl, v.until, true
}

// Shorten cuts the validity to until if that is earlier and the lease has
// not ended. Call it before sending a call that may shorten the expiry:
// the store may apply it at once, whatever becomes of its reply, so the
// holder must not count on the longer validity while the call is out.
func (v *Validity[T]) Shorten(h Holder, until time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil && until.Before(v.until) {
		v.until = until
		v.arm(h)
	}
}

// Settle applies the outcome of a call begun with BeginCall or TryBeginCall,
// which asked the store at start to set the expiry to ttl and got grantTTL
// or err, ends the call, and returns the call's error, or the lease's if it
// ended.
//
// Calls are serialised, so a success sets the validity outright, earlier
// too: it is the expiry applied last. "Not held" loses the lease. Any other
// failure may have been applied all the same, so the validity is cut to
// what that call would give if it is shorter; it never grows without a
// reply.
func (v *Validity[T]) Settle(h Holder, start time.Time, ttl, grantTTL time.Duration, err error) error {
	if errors.Is(err, driver.ErrNotHeld) {
		v.mu.Lock()
		v.endCall()
		v.mu.Unlock()
		return v.Lose(h, err)
	}
	v.mu.Lock()
	if v.err == nil && err == nil {
		v.until, v.ttl, v.renewErr = ValidUntil(start, grantTTL, ttl), ttl, nil
		v.arm(h)
	} else if v.err == nil {
		v.renewErr = err
		if u := ValidUntil(start, ttl, ttl); u.Before(v.until) {
			v.until = u
			v.arm(h)
		}
	}
	v.endCall()
	v.mu.Unlock()
	if lerr := v.Err(h); lerr != nil { // lost meanwhile, or the reply came too late
		return lerr
	}
	return err
}

// EndCall ends a call begun with BeginCall or TryBeginCall that was not
// sent (nothing to settle).
func (v *Validity[T]) EndCall() {
	v.mu.Lock()
	v.endCall()
	v.mu.Unlock()
}

// endCall ends the call under way and wakes a BeginCall waiting for it.
// Called with v.mu held.
func (v *Validity[T]) endCall() {
	v.calling = false
	if v.callDone != nil {
		close(v.callDone)
		v.callDone = nil
	}
}

// Now returns the time on the lease's clock. The clock is set by Init and
// never changes.
func (v *Validity[T]) Now() time.Time { return v.clock.Now() }
