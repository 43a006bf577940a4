package dlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
)

// Observer is told of what a Client's locks, a Semaphores' permits and an
// RWLocks' holdings go through: waits, renewals, losses, releases and handoffs (EventType);
// and of a Limiter's decisions and a Guard's results. Set it with
// WithObserver (WithLimiterObserver for a Limiter); SlogObserver logs the events.
//
// Event is called synchronously, on the goroutine where the event happens:
// the caller's for waits, releases and handoffs, the renewal loop's for
// renewals, and for a loss the expiry timer's, the renewal loop's or the
// caller's (Release, Err or Close noticing it). No lock of the Client is
// held then. It must be safe for concurrent use and must not block: a slow
// observer delays the call it observes, and on the renewal loop every lease
// due in the same batch. It must not call the Client, Semaphores, RWLocks,
// Lease, Permit or RWHolding that emitted the event: a renewal event runs while the renewal's
// call is under way, and an Extend of that lease would wait for it.
type Observer interface {
	Event(ctx context.Context, e Event)
}

// ObserverFunc is a function that is an Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Event implements Observer.
func (f ObserverFunc) Event(ctx context.Context, e Event) { f(ctx, e) }

// WithObserver makes o observe acquisitions and the leases (or permits,
// or read-write holdings) they return: passed to New, NewSemaphores,
// NewRWLocks or NewGuard, every call; passed to a call, that call and its lease. A nil o observes nothing, at no cost: no
// event is made and nothing is allocated. Default: none.
func WithObserver(o Observer) Option {
	return func(c *config) { c.obs = o }
}

// Kind is the primitive an event is about. Other primitives name their own
// (a short lower-case word) and emit Events through the Observer they are
// given.
type Kind string

// The primitives of this package.
const (
	KindLock   Kind = "lock"   // a Client's lock (Lease)
	KindPermit Kind = "permit" // a Semaphores' holding of permits (Permit)
	KindRead   Kind = "read"   // an RWLocks' read holding (RWHolding), a downgraded one's too
	KindWrite  Kind = "write"  // an RWLocks' write holding (RWHolding), until Downgrade
)

// EventType says what happened.
type EventType string

// The events, in a holding's life. A call that fails before any I/O (bad
// arguments, a closed Client) emits none.
const (
	// EventWaitStart: Lock, TryLock, Do (or Acquire, TryAcquire; RLock,
	// TryRLock, RDo) begins.
	EventWaitStart EventType = "wait.start"
	// EventWaitEnd: the call ends, Outcome saying how, after Waited. With
	// OutcomeAcquired it is the acquisition: Fence and Count are the
	// holding's. Otherwise Err is the error the call returns.
	EventWaitEnd EventType = "wait.end"
	// EventRenewed: an automatic renewal succeeded; Lag is its round trip.
	EventRenewed EventType = "renewed"
	// EventRenewFailed: an automatic renewal failed with Err after Lag; it
	// is retried sooner. If the store said the holding is gone, EventLost
	// follows at once.
	EventRenewFailed EventType = "renew.failed"
	// EventLost: the holding ended without a release (Outcome is the
	// cause, Err the error Err reports), Held after it was acquired.
	EventLost EventType = "lost"
	// EventReleased: Release (or Commit) ended the holding, Held after it
	// was acquired. Background says the store did not confirm and the
	// release is retried in the background; Err is then why.
	EventReleased EventType = "released"
	// EventHandedOff: Release passed the lock to a local waiter without
	// freeing it in the store (Fence and Held are the releaser's); the
	// waiter's EventWaitEnd follows on its own goroutine.
	EventHandedOff EventType = "handoff"
)

// Outcome is how a wait ended (EventWaitEnd) or why a holding was lost
// (EventLost): a small fixed set, fit for a metric's attribute.
type Outcome string

// The outcomes.
const (
	OutcomeAcquired    Outcome = "acquired"    // the holding was granted
	OutcomeContended   Outcome = "contended"   // a single try met another holder
	OutcomeTimedOut    Outcome = "timed_out"   // the wait bound or ctx's deadline passed
	OutcomeCancelled   Outcome = "cancelled"   // ctx was cancelled, or Close ended the wait
	OutcomeRefused     Outcome = "refused"     // the store refused (ErrRefused)
	OutcomeUnavailable Outcome = "unavailable" // the store did not answer (ErrUnavailable)
	OutcomeInvalid     Outcome = "invalid"     // the store found the request invalid

	OutcomeExpired Outcome = "expired" // lost: the validity ran out
	OutcomeTaken   Outcome = "taken"   // lost: the store said the holding is gone
	OutcomeClosed  Outcome = "closed"  // lost: Client.Close ended it
)

// Event is one thing that happened to a key. It never carries the owner
// token. Fields that do not apply to its Type are zero.
type Event struct {
	Type    EventType
	Kind    Kind
	Key     string
	Fence   uint64        // the holding's fencing token, once granted
	Count   int           // hold count (lock), permits (permit) or 1 (read, write), once granted
	Outcome Outcome       // EventWaitEnd, EventLost
	Waited  time.Duration // EventWaitEnd: since EventWaitStart
	Held    time.Duration // EventLost, EventReleased, EventHandedOff: since the grant
	Lag     time.Duration // EventRenewed, EventRenewFailed: the renewal's round trip; EventLimitDecision: the store's
	// RetryAfter is set on EventLimitDecision when denied: when the
	// requests could be admitted.
	RetryAfter time.Duration
	// Background is set on EventReleased when the store did not confirm
	// the release: it is retried in the background until it answers.
	Background bool
	Err        error // EventWaitEnd (failed), EventRenewFailed, EventLost, EventReleased (unconfirmed)
}

// watch is what a holding made by an observed call keeps for its events:
// allocated only when an Observer is set, so that unobserved holdings cost
// one nil pointer.
type watch struct {
	obs   Observer
	since time.Time   // the grant, on the holding's clock
	quiet atomic.Bool // set for a holding whose grant was never reported
}

// waitOutcome classifies the error an acquisition returned (nil: acquired).
func waitOutcome(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, errClosed), errors.Is(err, errSemClosed), errors.Is(err, errRWClosed), errors.Is(err, context.Canceled):
		return OutcomeCancelled
	case errors.Is(err, ErrRefused):
		return OutcomeRefused
	case errors.Is(err, ErrInvalid):
		return OutcomeInvalid
	case errors.Is(err, ErrUnavailable):
		return OutcomeUnavailable
	case errors.Is(err, errWaitElapsed), errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimedOut
	case contended(err):
		return OutcomeContended
	}
	return OutcomeUnavailable // a grant that arrived after its validity
}

// contended reports whether err says another owner holds the key (or the
// permits). Apart from waitOutcome, whose success path allocates nothing.
func contended(err error) bool {
	var ce *ContendedError
	var pt *driver.PermitsTakenError
	var rt *driver.RWTakenError
	return errors.As(err, &ce) || errors.As(err, &pt) || errors.As(err, &rt)
}

// lossOutcome classifies the error of a lost holding.
func lossOutcome(err error) Outcome {
	switch {
	case errors.Is(err, errClosed):
		return OutcomeClosed
	case errors.Is(err, ErrTaken), errors.Is(err, ErrNotHeld):
		return OutcomeTaken
	}
	return OutcomeExpired
}

// waitStart emits EventWaitStart to obs and returns the wait's start.
func waitStart(ctx context.Context, obs Observer, clk Clock, kind Kind, key string) time.Time {
	obs.Event(ctx, Event{Type: EventWaitStart, Kind: kind, Key: key})
	return clk.Now()
}

// waitEnd emits the EventWaitEnd of a wait begun at start that ended with
// err, or with a holding of fence and count.
func waitEnd(ctx context.Context, obs Observer, clk Clock, kind Kind, key string, start time.Time, fence uint64, count int, err error) {
	obs.Event(ctx, Event{Type: EventWaitEnd, Kind: kind, Key: key, Fence: fence, Count: count,
		Outcome: waitOutcome(err), Waited: clk.Now().Sub(start), Err: err})
}

// silence makes l emit nothing more: for a lease passed on or given back
// before its caller got it (its grant was never reported), so that no
// release or handoff is reported for a holding the Observer never saw.
func (l *Lease) silence() {
	if l.watch != nil {
		l.watch.quiet.Store(true)
	}
}

// observe tells the Observer of the call that made l, if any, of e about l.
func (l *Lease) observe(ctx context.Context, e Event) {
	if l.watch == nil {
		return
	}
	e.Kind, e.Key, e.Fence, e.Count = KindLock, l.key, l.fence, int(l.holds)
	l.watch.emit(ctx, l.v.Now(), e)
}

// observe tells the Observer of the call that made m, if any, of e about
// m.
func (m *member) observe(ctx context.Context, e Event) {
	if m.watch == nil {
		return
	}
	e.Kind, e.Key = m.self.eventKind(), m.key
	e.Fence, e.Count = m.self.grant()
	m.watch.emit(ctx, m.v.Now(), e)
}

// emit sets e's Held (for the events that end a holding) as of now, and
// tells the Observer.
func (w *watch) emit(ctx context.Context, now time.Time, e Event) {
	if w.quiet.Load() {
		return
	}
	switch e.Type {
	case EventLost, EventReleased, EventHandedOff:
		e.Held = now.Sub(w.since)
	}
	w.obs.Event(ctx, e)
}

// endEvent is the event of a release that the store answered with err:
// the holding was gone (lost, taken), or released, in the background if
// background.
func endEvent(err error, background bool) Event {
	if isNotHeld(err) {
		return Event{Type: EventLost, Outcome: OutcomeTaken, Err: err}
	}
	return Event{Type: EventReleased, Background: background, Err: err}
}

// renewEvent is the event of a renewal sent at start that the store
// answered at now with err.
func renewEvent(start, now time.Time, err error) Event {
	if err != nil {
		return Event{Type: EventRenewFailed, Lag: now.Sub(start), Err: err}
	}
	return Event{Type: EventRenewed, Lag: now.Sub(start)}
}

// newWatch returns the watch of a holding granted now by a call configured
// as cfg, or nil if the call has no Observer.
func newWatch(cfg config) *watch {
	if cfg.obs == nil {
		return nil
	}
	return &watch{obs: cfg.obs, since: cfg.clock.Now()}
}
