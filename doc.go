// Package dlock provides distributed locks: leases on a shared store that
// one process at a time may hold, with automatic renewal, a signal when a
// lock is lost, and fencing tokens for the resource it protects. Start with
// New on a store, then Client.Do (or Client.Lock and Lease.Release); the
// examples use memstore and run without a server.
//
// The stores are Redis (package redisstore: a single server, Sentinel or
// Cluster) and Redlock over several Redis primaries (package redlock) in
// this module; etcd (example.com/dlock/etcdstore), ZooKeeper with Apache
// Curator's lock layout (example.com/dlock/zkstore), PostgreSQL
// (example.com/dlock/pgstore) and MySQL/MariaDB (example.com/dlock/mysqlstore),
// each in a module of its own; or any other store that implements
// driver.Mutex. The SQL stores offer
// a lease table and a session lock as stores, and a row lock in the caller's
// transaction as a function of their own.
//
// # Where to read more
//
// In the repository, README.md has a complete program; docs/safety.md the safety model; docs/api.md the full
// contract of each call; docs/stores.md, docs/redlock.md, docs/etcd.md,
// docs/zookeeper.md, docs/postgres.md and docs/mysql.md each store; and
// docs/cli.md the dlock command.
//
// # Using it
//
// Create one Client per store and share it; close in reverse order of
// creation when done: the Client (Client.Close releases what it still
// holds), then the store (redisstore's Store.Close ends its pub/sub
// connection), then the Redis client, which the store does not own:
//
//	defer rdb.Close()
//	store, err := redisstore.New(rdb, nil)
//	if err != nil {
//		return err // ErrInvalid: a nil client, a bad option
//	}
//	defer store.Close()
//	locks, err := dlock.New(store)
//	if err != nil {
//		return err
//	}
//	defer locks.Close(context.Background())
//	err = locks.Do(ctx, "stock:10000", func(ctx context.Context) error {
//		// ctx is cancelled if the lock is lost while this runs
//		return decrement(ctx)
//	})
//
// Lock and Do hold a lease renewed automatically (30 s, renewed every 10 s;
// WithAutoRenew sets its length); WithTTL instead asks for a fixed lease
// that is never renewed and ends after the given time, however long the
// work takes.
//
// Lock blocks until the lock is held, the wait bound (WithWait) elapses or the
// context ends; it never gives up after a hidden number of tries and its wait
// is not tied to the lease. TryLock makes one attempt. Waiters on stores that
// can notify (Redis pub/sub, PostgreSQL NOTIFY) sleep until a release is
// announced, or until the holder's lease would run out, instead of polling;
// on stores with their own queue of waiters (etcd, ZooKeeper, the SQL session
// locks, Redis's fair store redisstore.NewFair: driver.Queuer) Lock waits in
// that queue, served in the server's order across processes.
//
// Waiters of one Client for one key queue in the process, first come first
// served, and only the first of them talks to the store. When a holder
// releases while another local waiter is queued, and the store supports it
// (driver.Transferer), the lock passes to that waiter in one store call: a new
// holding with its own owner token and a greater fence, never a shared one.
// After 64 such handoffs in a row, or once a run of them has lasted its
// time bound (5 ms, or 16 times the last handoff's store call if that is
// longer, at most 25 ms; at least 15 ms on a store that can neither notify
// nor queue waiters, such as the MariaDB lease table, whose other waiters
// learn of a release only at their next poll), the lock is released to the
// store so that other processes get their turn. Callers acquiring as an
// explicit Owner skip the queue (see below).
//
// The Lock waiters of one key in one process whose Clients share a store
// value (so its notifier) take turns as well: they share one subscription,
// and a release announcement wakes the one that subscribed first only. A
// waiter that gets the key wakes the next one, whose single attempt meets
// the new holding; one that gives up, or gets no answer from the store,
// after its wake-up hands it on. So a
// release costs each process one attempt or two however many of its
// Clients wait; the waiters not woken keep the bound above (the holder's
// expiry). On a store that can neither notify nor queue waiters (the
// MariaDB lease table) they line up the same way and only the first polls.
// Waits of read-write locks, semaphores and families are not lined up
// (one release may let several in).
//
// # Reading the protected value with the grant
//
// A read-modify-write section (lock, GET, SET, unlock) can skip its first
// read: with WithRead(resource) the store reads the resource key in the same
// atomic step and round trip that grants the lock (acquisition, re-entry or
// local handoff), and Lease.Value returns it. Stores that cannot
// (driver.Atomic is optional; redisstore, etcdstore and memstore have it,
// the Redlock, ZooKeeper and SQL stores lack it) ignore the option, and
// Lease.ValueRead reports false so the caller reads for itself:
//
//	l, err := locks.Lock(ctx, "item-42", dlock.WithRead("stock:{item-42}"))
//	...
//	v, found := l.Value() // found is false if the key does not exist
//	if !l.ValueRead() {
//		v, err = rdb.Get(ctx, "stock:{item-42}").Result() // store cannot read
//	}
//
// On Redis Cluster the resource must share the lock's slot: put the lock key
// in it as a hash tag, as above; other keys fail with ErrInvalid.
//
// The write can be folded too: Lease.Commit(ctx, value) writes the WithRead
// resource and releases the lock in one atomic step and round trip, and
// writes only if the lease still holds the lock in the store, so a holder
// that lost its lock cannot overwrite its successor's data. With a local
// waiter queued, the same call hands the lock on, so a busy key costs one
// round trip per read-modify-write section:
//
//	n, _ := strconv.Atoi(v)
//	err = l.Commit(ctx, strconv.Itoa(n-1)) // ErrLost: nothing was written
//
// # What a lease promises
//
// A Lease is valid until ValidUntil, measured on the local monotonic clock
// from the moment the acquisition started, minus clock drift (1% of the TTL
// plus 2 ms). Within that window no other Client following the protocol can
// acquire the same key, provided the store keeps its data and clocks run at
// roughly the same rate. By default the lease is 30 s and renewed every 10 s
// while the holder lives. The validity follows the expiry set in the store
// last: a renewal or Extend moves it forward, and an Extend shorter than what
// is left moves it back. If renewal fails, the lease is lost by a timer on
// the local clock, even when the store is unreachable: it fires a margin
// (5 ms, or a tenth of the TTL if less) before ValidUntil, so Done is closed
// by ValidUntil unless the process goes unscheduled for longer than the
// margin (a long GC pause, an overloaded machine), and then late by the
// excess; from ValidUntil on, Err reports the loss either way.
//
// No lease can protect against a holder that pauses (GC, SIGSTOP, a slow
// disk) past its validity and then writes: by then another holder may exist.
// For that, pass Lease.Fence to the protected resource and have it reject
// fences lower than one it has seen (FenceGate, or a conditional write).
// Inside Do, LeaseFromContext(ctx) returns the lease of the innermost Do,
// and so its fence.
//
// # Ownership and re-entry
//
// Go has no thread identity, so ownership is explicit. A lock acquired with a
// context carrying an Owner (ContextWithOwner) belongs to that owner, and the
// owner re-acquiring it increments a hold count instead of deadlocking. Do
// passes such a context to its function, and LeaseFromContext(ctx) gives the
// function the lease of the innermost Do (a nested Do on the same key gets
// the re-entrant lease: same fence, one more hold).
//
// An owner's holdings of one key share one record in the store, and none
// shortens another: an Extend or renewal of one asks the store for at least
// what every other live holding of the owner last set (Lease.Extend).
//
// # Giving keys back
//
// A holding that ends without the store confirming its release (Release
// with an ended context or a lost reply, a lease lost on the local clock, an
// acquisition whose reply was lost, a nested holding that ran out) is given
// back in the background: token-checked releases retried with jittered
// backoff until the store answers, for at most the lease (at least the
// session TTL on a session store), never before the validity a lost lease
// reported; an owner's holds once its last live holding of the key ended.
// Close waits for them within its context.
//
// # Errors
//
// Errors match the package's sentinels with errors.Is: ErrNotAcquired,
// ErrNotHeld, ErrLost (with cause ErrExpired, ErrTaken or ErrUnavailable, or
// ErrInvalid when Client.Close ended the lease),
// ErrInvalid, ErrUnavailable and ErrRefused (the store refused in a way that
// retrying cannot fix, such as a missing permission: Lock and Do then end
// their wait at once). A wait ended by its context also matches the
// context's error. Invalid input is rejected before any I/O.
//
// # Time model
//
// Each store declares its time and liveness model (driver.Model), which New
// reads once. On a per-key store (Redis, Redlock, memstore, the SQL lease
// tables) a lease is a TTL on the key: a TTL outside the store's
// MinTTL..MaxTTL is refused with ErrInvalid before any I/O, the default
// lease is raised to the store's MinTTL, and lease lengths are rounded up to
// its granularity (a millisecond on Redis, a microsecond on the SQL lease
// tables). On a session-based store (etcd, ZooKeeper, and the SQL session
// locks, whose session is a pinned connection) the locks live as long as the
// store's session: every lease lasts the session's TTL whatever WithTTL or
// WithAutoRenew ask for, and is renewed every third of it; renewal keeps the
// session alive (on the SQL session locks, it checks that the connection
// still holds the lock). A fixed lease (WithTTL) is reported lost after the
// session's TTL, and the Client then gives its key back in the background
// (the session, kept alive by other leases, would otherwise hold it).
//
// # Semaphores
//
// NewSemaphores, on a store that implements driver.Semaphore (memstore and
// redisstore today), gives counting semaphores: Semaphores.Acquire takes
// permits of a key whose limit is stored with it, all at once, and returns
// a Permit: a lease of its own, renewed, fenced and lost-signalled as a
// Lease is, whose permits come back at the end of its own lease if its
// holder crashes. docs/semaphore.md has the details.
//
// # Read-write locks
//
// NewRWLocks, on a store that implements driver.RWMutex (memstore and
// redisstore today), gives read-write locks: many readers of a key at once
// (RWLocks.RLock) or one writer alone (RWLocks.Lock), each holding an
// RWHolding, a lease of its own, renewed, fenced and lost-signalled as a
// Lease is. A waiting writer keeps later readers out, so readers cannot
// starve it; a crashed reader keeps a writer out no longer than its own
// lease; a write holding can be downgraded to read in place, and an
// upgrade is refused at once (ErrUpgrade). docs/rwlock.md has the details.
//
// # Observability
//
// WithObserver sets an Observer told of every wait (with its outcome and
// duration), renewal, loss (with its cause), release and handoff, for
// locks, permits and read-write holdings alike, never with the token; SlogObserver logs them
// with log/slog, a loss at Warn. Without one, nothing is built or
// allocated. An Observer that is also a CallObserver gives each call a
// context (for a span around its wait and hold). docs/observability.md has
// the events and the contract.
//
// # Rate limits
//
// NewLimiter, on a store that implements driver.RateLimiter (memstore,
// redisstore, and the pgstore and mysqlstore lease tables today), admits requests under a limit of a rate per period
// with a burst (GCRA), counted on the store's clock for every process that
// uses the store: Limiter.Allow and AllowN answer at once, Wait and WaitN
// wait for the budget, as golang.org/x/time/rate's do in one process. A
// key is a budget: one key for everyone, or one per client.
// On a store that is not a driver.RateLimiter (etcdstore, which has no
// clock to decide on), NewLimiter fails with errors.ErrUnsupported.
// docs/ratelimit.md has the details.
//
// # Idempotency
//
// NewGuard, on a store that implements driver.Idempotency (memstore and
// redisstore today), gives the idempotency guard: Guard.Do runs a
// request's function once per key and replays its stored result to later
// calls; a concurrent call gets ErrInFlight, another request with the key
// ErrMismatch. The running call's record is a lease, renewed while the
// function runs and taken over with a greater fence if its process dies;
// Execution.DownstreamKey is the key to pass on to calls that must not run
// twice. Package idemhttp is its net/http middleware. docs/idempotency.md
// has the details.
//
// # Stores
//
// A store makes one attempt per call; this package does everything generic
// (waiting, backoff with jitter, renewal, validity, loss signals) once.
// Store authors read package driver: the contract (driver.Mutex, which
// Client.Store returns), the time model, the optional capabilities a store
// may offer (notification, its own queue, batched renewal, transfer, atomic
// read and write with the lock, inspection, listing, waiter counts, checks),
// and for each what the Client does when it is absent. A wrapper around a
// store (a fault injector, a metrics decorator) keeps the wrapped store's
// capabilities visible by implementing driver.Unwrapper. Package drivertest
// checks a store against the written contract. Package memstore is an
// in-memory store for examples and tests.
package dlock
