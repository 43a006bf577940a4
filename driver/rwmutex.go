package driver

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// RWMutex is the read-write lock: many read holdings of a key at once, or
// one write holding. Each holding is a token's lease of its own: a mode, a
// fence and an expiry on the store's clock, extended and released on its
// own. It is a Store: its Model declares the time model of the holdings'
// leases.
//
// Rules, besides the ones in the package documentation (checked by package
// drivertest):
//
//   - Many readers or one writer: a live write holding of a key is the
//     only live holding of it; read holdings share the key with each other
//     only.
//   - Writer preference: AcquireWrite refused because the key is held
//     leaves a writer-waiting mark on the key (and nothing else), which
//     lasts WriterWaitTTL on the store's clock and is renewed by each of
//     the waiting writer's retries. While a mark is live, AcquireRead by a
//     token with no holding is refused, so an endless stream of
//     overlapping readers cannot starve a writer: it gets in once the
//     readers ahead of it have left. The mark ends when the writer that
//     set it last gets the key, or WriterWaitTTL after its last retry.
//   - Each holding expires on its own: when a holding's expiry passes (on
//     the store's clock) it ends, whatever the other holders do; ExtendRW
//     by one token changes no other holding's expiry, so a crashed reader
//     keeps a writer out no longer than its own lease.
//   - Re-entry: a token holds a key at most once. AcquireRead by a reader
//     or AcquireWrite by the writer is a re-entry without a count: it
//     returns the holding's grant (same fence; a mark does not refuse it)
//     and sets its expiry to the later of the current one and ttl from
//     now, so that a resent command is harmless. AcquireRead by the writer
//     downgrades its holding to a read holding in place (same fence,
//     expiry as for a re-entry): other readers may then join, writers stay
//     out until it ends. AcquireWrite by a reader is an upgrade: it is
//     refused at once with an error matching ErrUpgrade (and ErrInvalid),
//     changing nothing, never a wait that could not end.
//   - Fences: every new holding's fence is strictly greater than every
//     earlier holding's of that key, read or write (so a write holding's
//     fence is above every earlier holding's and a read holding's above
//     every earlier write's); extension and downgrade keep it.
//   - ExtendRW and ReleaseRW by a token that holds nothing of key (a mark
//     is not a holding) change nothing and return NotHeld(false)
//     (ErrExpired).
//   - Invalid arguments (a key ValidateKey refuses, ttl <= 0) change
//     nothing and return an error matching ErrInvalid; stores check them
//     before any I/O (ValidateRW).
//   - Per-key state is bounded: once every holding and mark of a key has
//     ended and the store's documented retention has passed, nothing of it
//     is left.
//
// RWMutex keys are a namespace of their own: key "k" of an RWMutex, of a
// Mutex and of a Semaphore of the same store are different things.
type RWMutex interface {
	Store

	// AcquireRead gives token a read holding of key for ttl if no writer
	// holds it and no writer-waiting mark is live. Otherwise it returns a
	// *RWTakenError and changes nothing. A reader's call is a re-entry and
	// the writer's a downgrade (see the rules). A ctx already done makes it
	// fail, changing nothing. An error matching no sentinel means the
	// outcome is unknown (token may hold the key).
	AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (RWGrant, error)

	// AcquireWrite gives token the write holding of key for ttl if nothing
	// holds it. Otherwise it returns a *RWTakenError and leaves (or
	// renews) the writer-waiting mark, changing nothing else; by a reader
	// of key it returns an error matching ErrUpgrade, changing nothing.
	// Other errors are as for AcquireRead.
	AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (RWGrant, error)

	// ExtendRW sets the expiry of token's holding of key to ttl from now
	// (shorter or longer: the store follows the latest call), leaving every
	// other holding as it was. If token holds nothing of key it changes
	// nothing and returns NotHeld(false). An error matching no sentinel
	// means the expiry may or may not have been set.
	ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (RWGrant, error)

	// ReleaseRW ends token's holding of key and, if that leaves key free,
	// wakes its waiters (RWNotifier). If token holds nothing of key it changes nothing and
	// returns NotHeld(false); a resent release that already ran answers
	// nil. An error matching no sentinel means the holding may or may not
	// have ended.
	ReleaseRW(ctx context.Context, key, token string) error
}

// WriterWaitTTL is how long a writer-waiting mark lasts after the waiting
// writer's last AcquireWrite: a waiting writer retries more often than this
// to keep new readers out, and one that gives up holds them up at most this
// long, plus the interval at which the store ends expired leases (etcd:
// 500 ms), which the store documents.
const WriterWaitTTL = 2 * time.Second

// RWMode is a holding's mode.
type RWMode int

// The modes; the zero RWMode is no holding.
const (
	RWRead  RWMode = 1
	RWWrite RWMode = 2
)

// String returns "read", "write" or "none".
func (m RWMode) String() string {
	switch m {
	case RWRead:
		return "read"
	case RWWrite:
		return "write"
	}
	return "none"
}

// RWGrant describes a successful AcquireRead, AcquireWrite or ExtendRW.
type RWGrant struct {
	// Mode is the holding's mode after the call.
	Mode RWMode
	// Fence is the holding's fencing token (see the rules of RWMutex),
	// unchanged by extension and downgrade.
	Fence uint64
	// Readers is how many read holdings of the key are live right after
	// the call (this one included); 0 for a write holding.
	Readers int
	// TTL is how long, counted from the moment the call started, the store
	// keeps the holding at least: the requested ttl unless the store had to
	// shorten it.
	TTL time.Duration
}

// ErrUpgrade is what AcquireWrite returns, changing nothing, when the token
// holds a read holding of the key: a read holding is never upgraded in
// place (two upgrading readers would wait for each other for ever). It
// matches ErrInvalid. Release the read holding, then acquire the write.
var ErrUpgrade = fmt.Errorf("%w: a read holding cannot be upgraded to write; release it first", ErrInvalid)

// RWTakenError is what AcquireRead and AcquireWrite return when the key is
// not free for the mode asked. It matches ErrNotAcquired.
type RWTakenError struct {
	// Held is the mode the key is held in (0 when only a writer-waiting
	// mark refused a reader); Readers how many read holdings are live.
	Held    RWMode
	Readers int
	// WriterWaiting says a writer-waiting mark is live.
	WriterWaiting bool
	// Remaining is the time until the first thing that refused the call
	// ends as the store saw it (a holding's expiry, or the mark's when
	// only the mark refused), unless released sooner; negative if the
	// store does not know.
	Remaining time.Duration
}

// Error says what holds the key and when the first of it ends.
func (e *RWTakenError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNotAcquired.Error())
	switch e.Held {
	case RWWrite:
		b.WriteString(": held by a writer")
	case RWRead:
		fmt.Fprintf(&b, ": held by %d readers", e.Readers)
	default:
		b.WriteString(": free")
	}
	if e.WriterWaiting {
		b.WriteString(", a writer is waiting")
	}
	if e.Remaining >= 0 {
		fmt.Fprintf(&b, "; the first of it ends in %v", e.Remaining.Round(time.Millisecond))
	}
	return b.String()
}

// Is reports whether target is ErrNotAcquired.
func (e *RWTakenError) Is(target error) bool { return target == ErrNotAcquired }

// ValidateRW reports whether the arguments of an RWMutex call are
// acceptable: key as ValidateKey and ttl > 0. The error matches ErrInvalid.
func ValidateRW(key string, ttl time.Duration) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %v: want > 0", ErrInvalid, ttl)
	}
	return nil
}

// RWNotifier wakes waiters of an RWMutex key when a release leaves it free
// or a holding is downgraded: the Notifier of RWMutex keys.
//
// Absent, or when SubscribeRW returns any error: waiters retry with
// backoff, capped by RWTakenError.Remaining when the store reports it.
type RWNotifier interface {
	// SubscribeRW registers interest in key, as Notifier.Subscribe does for
	// a Mutex key: once it returns without error, every later ReleaseRW
	// that leaves key with no holding and every downgrade sends a value on
	// the channel (values may be coalesced; the channel is never closed).
	// A release that leaves other holdings lets no waiter in (a writer
	// needs the key free; a reader kept out waits for a writer or a mark)
	// and may send or not; acquisitions, extensions, marks and refused
	// calls send nothing. cancel ends the subscription
	// and must be called exactly once. On error nothing stays subscribed.
	SubscribeRW(ctx context.Context, key string) (ch <-chan struct{}, cancel func(), err error)
}

// RWHolder is one holding of an RWMutex key, as RWInspector reports it.
type RWHolder struct {
	// Token is the holder's token (a secret: never log it), or "" where
	// the store keeps only a digest of tokens (etcdstore).
	Token string
	Mode  RWMode
	Fence uint64
	// Remaining is the holding's remaining time to live.
	Remaining time.Duration
}

// RWInfo is an RWMutex key's state.
type RWInfo struct {
	// Mode is the mode the key is held in, 0 when free.
	Mode RWMode
	// Holders are the live holdings, in no particular order.
	Holders []RWHolder
	// WriterWaiting is the live writer-waiting mark's remaining time, 0
	// when there is none.
	WriterWaiting time.Duration
}

// RWInspector reads an RWMutex key's state without changing it.
//
// Absent: the state of a read-write lock cannot be shown.
type RWInspector interface {
	// InspectRW returns key's live holdings and mark. A free key is not an
	// error. It changes nothing.
	InspectRW(ctx context.Context, key string) (RWInfo, error)
}
