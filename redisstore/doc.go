// Package redisstore is the driver.Mutex (and driver.Semaphore,
// driver.RWMutex, driver.RateLimiter and driver.Idempotency) for Redis: a
// single server, a Sentinel-managed primary or a Cluster, through any
// go-redis redis.UniversalClient.
//
// Each operation is one round trip: a Lua script run by EVALSHA (falling back
// to EVAL when the server lacks it). Acquires and releases made by several
// goroutines at once share round trips: while a few are on the wire, the
// next ones go out together as one pipeline (each still its own script call
// with its own reply, and each caller's context keeps its meaning). A lock
// named K is one string PREFIX{K} = "<holds>:<fence>:<call id>:<owner token>"
// with an expiry, and its release channel is PREFIX{K}:released. Holds 0 is a
// tombstone: a final release leaves the lock free, with its last fence, for
// Options.Retention. A new holding's fence is max(last fence + 1, the
// server's TIME in microseconds), so fences strictly increase per key while
// the tombstone lasts and, after it is gone, as long as the server's clock
// does not step back past the fences it issued (this also holds across a
// restart without persistence, and across a failover to a replica that
// missed the last holding, as long as the two servers' clocks agree). No per-key state outlives the retention: a
// key locked once costs nothing after its lease or its retention ends.
//
// A call that changes a lock carries a call id, recorded in the lock; a
// final release or a transfer also leaves PREFIX{K}:released:<owner token> =
// "<call id>:<fence>" for the retention. go-redis resends a command after a
// read timeout or a broken connection (MaxRetries, on by default) and a
// store cannot turn that off per command; with these records a resent
// acquire, release, transfer or commit finds that it already ran and answers
// what the first run did instead of running again. A client that never
// resends (a *redis.Client or *redis.ClusterClient with MaxRetries or
// MaxRedirects -1, as Redlock's nodes are) gets no release record: no
// resent release could ever read it. So ErrNotHeld (ErrLost
// for Commit) always means nothing was written, provided the client's
// retries end within the retention (Options.Retention). One gap: a release
// resent after another goroutine with the same dlock.Owner re-acquired the
// key in between is not recognised; keep one Owner to one goroutine at a
// time per key, as the Owner doc asks.
//
// The {K} hash tag keeps all of a lock's keys in one Cluster slot. Taking a
// lock costs the server TIME, GET and one SET PX in the script; a final
// release GET, two SETs (tombstone and record; one without the record) and
// PUBLISH: per command, not per byte, is what a script costs Redis
// (TestLockUnlockCommands counts them). It needs Redis 7.0 or later. Earlier versions of this
// package kept the lock in other layouts (a hash, or "<holds>:<owner>" with
// a separate PREFIX{K}:fence counter): a process running one of them and a
// process running this one refuse each other's locks (errors matching
// driver.ErrRefused from this version, never a grant) instead of sharing
// them, so upgrade the processes that share a Prefix together, or give the
// upgraded ones a new Prefix. The old PREFIX{K}:fence counters are neither
// read nor written any more: delete them at leisure.
//
// Errors that retrying cannot fix (missing ACL permissions, failed
// authentication, an unknown command, a lock key holding something that is
// not a lock) match driver.ErrRefused and name the key; other errors are
// returned as they are (the core treats them as unavailable).
//
// Safety: Redis replicates asynchronously, so a failover can lose a lock
// (and the fence then rests on the new primary's clock). Use the
// fencing token at the protected resource when correctness matters (see the
// README's safety model).
//
// # Capabilities
//
// Model: per-key TTLs of at least 10 ms, kept in milliseconds on the
// server's clock (ServerClock). Besides driver.Mutex a Store is a
// driver.Notifier (pub/sub on the release channel), driver.BatchExtender
// (one pipeline), driver.Transferer, driver.Atomic (a resource read or write
// in the same script), driver.Inspector, driver.Lister (SCAN; on a Cluster,
// every primary), driver.WaiterCounter (PUBSUB NUMSUB, summed over a
// Cluster's nodes), driver.Doctor (server, ACL, Cluster and,
// when opened from a redis+sentinel:// URL, Sentinel checks) and
// driver.Breaker (one script: the lock becomes a tombstone that keeps its
// fence and names the broken owner, see Store.Break) and driver.MetaKeeper
// (holder metadata in PREFIX{K}:meta, see Store.KeepsMeta).
//
// A Store is also a driver.Semaphore (with driver.PermitNotifier and
// driver.PermitInspector): semaphore K is a hash PREFIX{K}:sem (the limit,
// the permits out, the last fence, each holding's permits and fence) and a
// sorted set PREFIX{K}:sem:exp of each holding's expiry in ms on the
// server's clock, pruned by every script, so each holding ends at its own
// expiry. Fences are issued as for locks (max(last + 1, TIME in µs)); both
// keys expire Options.Retention after the last holding's expiry. A release
// leaves PREFIX{K}:sem:rel:<token> for the retention (a resent release is
// recognised) and publishes on PREFIX{K}:sem:released. Each call is one
// script; calls made at once share round trips, as acquisitions do, and
// renewals of many holdings are one pipeline (driver.PermitBatchExtender).
//
// And a Store is a driver.RWMutex (with driver.RWNotifier and
// driver.RWInspector): read-write lock K is a hash PREFIX{K}:rw (the mode,
// the last fence, each holding's fence, the writer-waiting mark's token and
// expiry) and a sorted set PREFIX{K}:rw:exp of each holding's expiry on the
// server's clock, pruned with the mark by every script. Fences, expiry of
// the keys, the release record (PREFIX{K}:rw:rel:<token>), the shared
// round trips and the batched renewals (driver.RWBatchExtender) are as for
// the semaphore; the channel PREFIX{K}:rw:released hears a release that
// leaves the key free, and a downgrade.
//
// A Store is also a driver.RateLimiter: limiter key K is one string
// PREFIX{K}:rate holding its TAT (GCRA) in µs on the server's clock, with an
// expiry (PX) at the TAT, so an idle key costs nothing. An admitted call
// writes it in one script; a denied call writes nothing. Decisions made by
// several goroutines at once share round trips, as acquisitions do.
//
// A Store is also a driver.Idempotency: the record of scope S and key K is
// one hash PREFIX idem:{<S in hex>:<K>} (executor token, fence,
// fingerprint, lease end in ms on the server's clock, retention; once
// completed, the result), which expires its retention after the lease or
// the completion. Takeover fences are max(last + 1, TIME in µs). Each call
// is one single-key script.
//
// # URLs
//
// Importing the package registers these schemes with driver.Register, for
// driver.Open (and the CLI's --store):
//
//	redis://[user:pass@]host:port[/db]                    one server
//	rediss://…                                            the same over TLS
//	redis+cluster://[user:pass@]host:port,host:port       a Cluster (seed nodes)
//	redis+sentinel://[user:pass@]host:port,host:port/<master-name>[?db=N]
//	rediss+cluster://…, rediss+sentinel://…               over TLS
//
// A missing port means 6379 (except on the last host of a list, where Go's
// URL parser wants one); IPv6 literals work only in single-host URLs. On
// Sentinel URLs user:pass are the primary's credentials and the query
// parameters sentinel-username= and sentinel-password= the Sentinels' own.
// Every form takes prefix= (Options.Prefix), retention=
// (Options.Retention, a Go duration), fair=true (a FairStore) and, with it,
// waiter_lease= (Options.WaiterLease), and the TLS forms cacert=, cert= and
// key= (PEM files: the authorities to check the server against instead of
// the system's roots, and a client certificate); other query parameters are
// go-redis' own (dial_timeout=, read_timeout=, max_retries=, …; see
// redis.ParseURL).
// Opening makes no network call; Opened.Close closes the store and the
// client the opener made; Opened.Describe names the servers, never a
// password. Bad URLs return errors matching driver.ErrInvalid that do not
// contain the password.
//
// # Fair lock
//
// NewFair (or a URL with fair=true) returns a FairStore: the same lock,
// plus a driver.Queuer whose waiters are served first come, first served
// across processes. The queue of lock K is a list PREFIX{K}:queue and a
// sorted set PREFIX{K}:waiters of each waiter's lease deadline on the
// server's clock (Options.WaiterLease, 3 s by default, renewed every third
// of it while the waiter waits). Every try evicts the waiters whose own
// lease has ended, so a dead waiter holds the queue up at most one waiter
// lease, and dead waiters in a row are evicted together. A plain Acquire
// (TryLock) fails while others queue. A FairStore is not a Transferer,
// Atomic, Notifier or Semaphore. docs/fairlock.md has the guarantees and
// the costs.
//
// # Where to start
//
// New over your go-redis client (or driver.Open with one of the URLs
// above), then dlock.New; the examples show the order in which to close
// them. The repository's README.md (sections "Stores" and "Safety model")
// and docs/redlock.md (Cluster, Sentinel and what a failover can lose) have
// the long form.
package redisstore
