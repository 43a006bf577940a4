package driver

import (
	"context"
	"time"
)

// Notifier wakes waiters when a key is released.
//
// Absent, or when Subscribe returns any error: waiters retry with the
// client's backoff, capped by the holder's remaining TTL when the store
// reports it (ContendedError.Remaining).
type Notifier interface {
	// Subscribe registers interest in releases of key. Once it returns
	// without error, every later release of key sends a value on the channel
	// (values may be coalesced; the channel is never closed). A value means
	// key was released (or, on stores that say so, expired): acquisitions,
	// extensions and refused releases send nothing, since every spurious
	// wake-up costs each waiter a round trip. cancel ends the subscription
	// and must be called exactly once. On error the client uses neither ch
	// nor cancel, so the store leaves nothing subscribed; any error makes
	// the client fall back to its backoff, and a store that cannot notify
	// at the moment of the call returns one matching errors.ErrUnsupported
	// (Unsupported).
	Subscribe(ctx context.Context, key string) (ch <-chan struct{}, cancel func(), err error)
}

// Queuer waits for a key in the store's own queue (etcd's and ZooKeeper's
// FIFO of waiters, a database's blocking lock wait), so that waiting needs
// neither polling nor notifications, and waiters are served in order across
// every process, including processes that are not dlock (etcdctl lock,
// Curator).
//
// The client waits in it for Lock and Do with a wait bound other than zero;
// TryLock (one Acquire) does not, nor does a WithRead on a store that is
// also Atomic, unless the store is a QueueReader too (a plain queue cannot
// read with the grant).
//
// Absent: the client waits with Acquire, Notifier and backoff.
type Queuer interface {
	// AcquireQueued behaves as Acquire, but when another owner holds key it
	// joins the store's queue and waits until token holds key or ctx ends.
	// When it returns an error (ctx's, or the store's) it has left nothing
	// in the store: its queue entry is removed. An error matching no
	// sentinel means the outcome is unknown, as for Acquire.
	AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (Grant, error)
}

// QueueReader is a Queuer that also reads a resource key with the grant, as
// an Atomic Acquire step with a Read does: WithRead on a Lock that waits in
// the store's queue. The client uses it only on a store that is also Atomic
// (Lease.Commit writes with the Atomic Release or Transfer step).
//
// Absent: a WithRead Lock on an Atomic store does not wait in the queue; it
// waits with Apply (Acquire with Read), Notifier and backoff.
type QueueReader interface {
	// AcquireQueuedRead behaves as AcquireQueued and, when it grants key,
	// also returns the value resource has at the grant, read atomically
	// with it (resource names a key verbatim, as Step.Read; empty reads
	// nothing): what the previous holder wrote with its release, and no
	// later write. When it returns an error it reads nothing and leaves
	// nothing in the store, as AcquireQueued; a resource the store cannot
	// honour is refused with an error matching ErrInvalid before any I/O.
	AcquireQueuedRead(ctx context.Context, key, token string, ttl time.Duration, resource string) (Grant, Value, error)
}

// ExtendRequest is one item of a batched renewal: the arguments of one
// Mutex.Extend.
type ExtendRequest struct {
	// Key and Token name the holding to renew, as Extend's key and token.
	Key, Token string
	// TTL is the new expiry, counted from the call, as Extend's ttl.
	TTL time.Duration
}

// ExtendResult is the outcome of one ExtendRequest.
type ExtendResult struct {
	// Grant is what Extend would have returned; zero when Err is not nil.
	Grant Grant
	// Err is what Extend would have returned: NotHeld(taken) for a token
	// that does not hold the key, an error matching no sentinel when the
	// outcome is unknown.
	Err error
}

// BatchExtender renews many leases in one round trip (a pipeline, or one
// session keepalive). The renewal loop uses it when a tick renews more than
// one lease.
//
// Absent: the renewal loop calls Extend once per lease.
type BatchExtender interface {
	// ExtendBatch behaves like calling Extend for each request, returning one
	// result per request in the same order (len(reqs) results, also when
	// the round trip fails: then each result carries the error). It has no
	// error of its own: every failure is a result's Err.
	ExtendBatch(ctx context.Context, reqs []ExtendRequest) []ExtendResult
}

// Transferer passes a held key from one token to another in one call, for
// the client's local handoff to a waiter of the same client. The transfer is
// a new holding: a new owner token and a fence greater than every earlier
// one.
//
// Absent: the client releases the key and the waiter acquires it.
type Transferer interface {
	// Transfer makes token to the holder of key with one hold, a fence
	// greater than every earlier one and an expiry of ttl, if token from
	// holds key with exactly one hold. If from does not hold key it changes
	// nothing and returns NotHeld(taken); if from holds it more than once
	// (re-entered) it changes nothing and returns an error matching
	// ErrInvalid.
	Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (Grant, error)
}

// Action is the lock step of an Atomic Step.
type Action int

// The lock steps an Atomic store can combine with a resource read or write.
const (
	// Acquire as Mutex.Acquire (Token, TTL). Write must be nil.
	Acquire Action = iota + 1
	// Transfer as Transferer.Transfer (Token → To, TTL).
	Transfer
	// Release as Mutex.Release (Token).
	Release
)

// Step is one lock step plus at most one read and one write of a resource
// key: the caller's own data, named verbatim (no prefix).
type Step struct {
	// Action is the lock step: Acquire, Transfer or Release. Any other
	// value is refused with an error matching ErrInvalid.
	Action Action
	// Key is the lock's key, as the Mutex methods take it.
	Key string
	// Token is the acquiring token (Acquire) or the current holder
	// (Transfer, Release).
	Token string
	// To is the receiving token of a Transfer.
	To string
	// TTL is the lease length of an Acquire or Transfer.
	TTL time.Duration
	// Write, if not nil, sets a resource key, only while Token holds Key and
	// in the same atomic step as a Release or Transfer.
	Write *Write
	// Read, if not empty, names a resource key whose value is returned as it
	// is right after the step (after Write, when both are set).
	Read string
}

// Write is a resource write of an Atomic Step.
type Write struct {
	// Resource names the key written, verbatim (no prefix); Value is
	// written to it, replacing what it held.
	Resource, Value string
}

// Value is a resource key's value read by an Atomic Step.
type Value struct {
	// Data is the value; empty when the key did not exist.
	Data string
	// Found reports whether the key existed.
	Found bool
}

// Atomic combines a lock step with a read or write of the caller's data in
// one atomic step and round trip: dlock.WithRead and Lease.Commit.
//
// Absent: WithRead reads nothing (Lease.ValueRead reports false) and
// Lease.Commit returns an error matching ErrInvalid before any I/O.
type Atomic interface {
	// Apply performs step. A step whose lock part fails or is contended
	// reads and writes nothing and returns the lock part's error. A store
	// that cannot honour a resource name (a Redis Cluster key in another
	// slot than the lock's) returns an error matching ErrInvalid and changes
	// nothing.
	Apply(ctx context.Context, step Step) (Grant, Value, error)
}

// Info describes the state of one key, as reported by an Inspector.
type Info struct {
	// Held reports whether some owner holds the key.
	Held bool
	// Token is the holder's owner token, if the store knows it (a secret:
	// abbreviate it for display). It is empty when the store does not know
	// it: for a holder that is not a dlock client (etcdctl lock, see
	// Foreign), and on a store that keeps only a digest of tokens (etcd) for
	// a holding taken through another store value, in this process or
	// another.
	Token string
	// Foreign reports that the holder is known not to be a dlock client
	// (etcdctl lock on etcd). False with an empty Token means a dlock
	// holder whose token this store cannot read.
	Foreign bool
	// Holds is the holder's hold count.
	Holds int
	// Remaining is the holder's remaining time to live; negative if the
	// store does not know.
	Remaining time.Duration
	// Fence is the holding's fence, or when free the last fence issued for
	// the key; 0 if none is known (never locked, or released longer ago than
	// the store keeps state for).
	Fence uint64
	// Meta is the holder metadata (WithMeta) of the holding, when Held on a
	// store that keeps it (MetaKeeper), or what a holder that is not a dlock
	// client wrote (Curator's node data); empty otherwise. It never holds
	// the token.
	Meta string
}

// Inspector reads a key's state without changing it (dlock status).
//
// Absent: dlock status reports that the store cannot inspect keys.
type Inspector interface {
	// Inspect returns key's state. A free key is not an error: Info.Held is
	// false. It changes nothing. Errors: one matching errors.ErrUnsupported
	// when the store cannot inspect at the moment (Unsupported), ErrRefused
	// for a key whose value is not a lock, otherwise the store's error
	// (matching no sentinel when it did not answer).
	Inspect(ctx context.Context, key string) (Info, error)
}

// Lister enumerates the keys a store has state for (dlock list), without
// knowing its layout.
//
// Absent: dlock list reports that the store cannot list keys.
type Lister interface {
	// List calls fn for each key with state whose name starts with prefix,
	// in no particular order, until fn returns false or the keys run out.
	// Keys that are not locks are skipped. It changes nothing. On error it
	// stops; fn may have been called for some keys before it, and an error
	// matching errors.ErrUnsupported means the store cannot list at the
	// moment (Unsupported).
	List(ctx context.Context, prefix string, fn func(key string, info Info) bool) error
}

// WaiterCounter counts the waiters that are listening for releases of a key
// across every client (Redis subscribers, queued etcd keys).
//
// Absent: waiter counts are reported as unknown.
type WaiterCounter interface {
	// Waiters returns how many waiters the store knows of for key (0 for
	// none). It changes nothing. On error the count is 0 and unknown; one
	// matching errors.ErrUnsupported means the store cannot count at the
	// moment (Unsupported).
	Waiters(ctx context.Context, key string) (int, error)
}

// BrokenHolding is what Breaker.Break ended.
type BrokenHolding struct {
	// Info is the holding as Inspect would have described it just before
	// the break: Held false means the key was free and nothing changed.
	Info
	// NotALock reports that the key held a value that is not a lock (the
	// store's Inspect refuses such a key) and that Break removed it; Info
	// is then Held with nothing else known.
	NotALock bool
}

// Breaker frees a key whoever holds it: an operator's way out of a holder
// that hung without dying (dlock release --force). It is not part of
// locking: a holder that is still running loses its lock while it may be
// writing, so only a person (or a tool a person runs) should call it.
//
// Absent: a key is freed only by its holder's Release or by its expiry;
// dlock release --force reports that the store cannot break locks.
type Breaker interface {
	// Break ends the holding of key, all its holds at once, whoever holds
	// it, waking waiters as a release would, and returns what it ended.
	// Fences stay strictly increasing: the next holding of key gets a fence
	// greater than the broken one's. The broken holder's Extend and Release
	// change nothing and return NotHeld(taken): at once, and at least until
	// the broken holding would have expired (a store documents where it
	// cannot tell and answers NotHeld(false) instead). A free key is not
	// an error: Held false, and nothing changes. A key that holds a value
	// that is not a lock is removed (NotALock) where the store can tell it
	// from a lock, or refused with an error matching ErrRefused, changing
	// nothing; a store documents which. Other errors are the store's: one
	// matching no sentinel means the break may or may not have happened.
	Break(ctx context.Context, key string) (BrokenHolding, error)
}
