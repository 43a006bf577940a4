// Package etcdstore is a dlock store on etcd (driver.Mutex on the session
// model, and driver.Semaphore and driver.RWMutex), with the key layout of
// etcd's concurrency.Mutex, so that dlock clients and `etcdctl lock`
// exclude each other and wait in one queue.
//
// # Model
//
// A Store holds every lock it takes in one etcd lease, its session, created
// on first use with a TTL of whole seconds (Options.SessionTTL, default 10 s,
// at least 2 s: etcd's minimum with its default election timeout). Renewal is
// the session's keepalive: Extend sends one (concurrent ones share it) and
// confirms the key is still held. A Grant's TTL is how long the session is
// certain to last, counted from the start of the call: from the time the
// last keepalive (or the grant) that the server confirmed was *sent*, plus
// the session TTL. The server sets the lease's expiry when the request
// arrives, so the server cannot free a key before that point, and the dlock
// Lease, whose validity is that point less a drift margin, reports its loss
// first. (etcd's own concurrency.Session counts from the reply instead, so
// its Done can close after the server has already freed the key.) When the
// session expires every holding of the Store is lost (Extend and Release
// return driver.NotHeld(false)) and the next acquisition starts a new one.
//
// Because the session is shared, a holding lasts as long as anything keeps
// the session alive: a dlock Lease with a fixed TTL (dlock.WithTTL) is
// reported lost after the session TTL, yet its key stays held while another
// Lease of the Store is renewed, until it is released or the Store closed.
// A caller that holds keys through the Store without a dlock Client renews
// the session with Store.KeepAlive.
//
// # Layout
//
// Lock name N lives under the etcd prefix Options.Prefix+N+"/"; a holding or
// waiter is the key <prefix>N/<lease id hex>_<n>, attached to the session,
// where n is the smallest number the Store has no key of N under (usually
// 0: a busy lock reuses one key name, so etcd's index does not grow with
// every holding until the next compaction). The holder is the key with the
// smallest CreateRevision under the prefix, as for concurrency.Mutex, and
// `etcdctl lock <prefix>N` joins the same queue. The suffix keeps two
// holdings or waiters of one Store on one name apart (with
// concurrency.Mutex they would share a key).
// The value is "dlock/1 <holds> <digest>": the hold count and 16 bytes of
// the token's SHA-256, never the token (then, after a transfer, the fence,
// and for a holding with holder metadata, a newline and the metadata:
// driver.MetaKeeper). Keys of etcdctl have empty values: Inspect reports
// them held, with no token.
// The value keeps a digest of the token, not the token, so any Store (of
// any process) can release, renew or re-enter a holding by its token, as on
// the other stores; Release of another Store's holding costs an extra read,
// and Extend or re-entry of it a keepalive of that Store's session too. A lock name that is
// a path prefix of another (a and a/b) shares its etcd prefix, as with
// etcdctl: a holder of a/b makes a look held (more exclusion, never less).
//
// Fences come from etcd's cluster-wide revision: a holding taken at once has
// its key's CreateRevision; one that waited in the queue, the revision of
// the read that found it first; one handed on by Transfer, the previous
// fence plus one, written into the value (" <fence>" after the digest).
// OwnerCmp gives a comparison (on the holding key's ModRevision) to put in
// your own etcd transaction so that etcd itself rejects a stale holder's
// write.
//
// Transfer (driver.Transferer, the Client's local handoff) rewrites the
// holder's value to the next holder's digest and fence in one
// compare-and-set: the key keeps its place at the head of etcd's queue, so
// other processes' waiters are not woken and a handoff is one write.
//
// Acquire is one transaction (free: put our key; else read the holder);
// re-entry and release are one compare-and-set on the key's ModRevision,
// which also guards a retried release against deleting a newer holding of
// the same session (etcd issue #22082). AcquireQueued (driver.Queuer) puts
// the key and watches only its predecessor (FIFO, no herd); it keeps the
// session alive while it waits and stops with an error when the session
// expires (etcd issue #19597).
//
// Apply (driver.Atomic: dlock.WithRead and Lease.Commit) folds a read or
// write of one resource key, named verbatim, into the acquiring, releasing
// or handing-off transaction, under the same ownership compare: a holder
// that lost the lock writes nothing. AcquireQueuedRead (driver.QueueReader)
// reads it in the transaction that finds a queued waiter at the head, so a
// WithRead Lock still waits in etcd's queue. A resource inside the lock
// prefix is refused with driver.ErrInvalid.
//
// # Semaphore and read-write lock
//
// Semaphore key K lives under Options.Prefix+"\xffsem/"+K+"\xff" and
// read-write lock K under Options.Prefix+"\xffrw/"+K+"\xff" (0xff is in no
// valid key, so no Mutex prefix covers them): one key per holding, on the
// session lease, its CreateRevision the fence (a semaphore holding's name
// is reused as a Mutex key's is; a read-write lock's is the token's
// digest); a writer-waiting mark is a key on a lease of its own of
// driver.WriterWaitTTL. Holdings live with the session, as Mutex holdings
// do (ttl is ignored). Every admission is one transaction whose guards
// decide it (for a semaphore, that no holding was created since the read
// that counted the permits), and every holding is a put on a live lease:
// no waiter owns after waiting without looking (etcd's recipe RWMutex does:
// etcd #16221). Waiters are woken by a watch of the key's holdings
// (driver.PermitNotifier, driver.RWNotifier). Inspection reports no token
// (etcd keeps a digest only), and refusals report Remaining -1.
//
// Break (driver.Breaker, dlock release --force) deletes the holder's key in
// one compare-and-set and puts a mark, outside every lock's prefix, on the
// holder's own etcd lease: the holder's Store then answers its Extend and
// Release with "taken" while its session lives (see Store.Break).
//
// # What it cannot do
//
// There is no Notifier for the Mutex (waiting is the Queuer's FIFO, or the client's
// backoff). A contended
// Acquire reports the holder's remaining time as unknown (-1); Inspect asks
// the server for it. The session TTL is whole seconds and at least 2 s, so
// a crashed holder's keys are freed only when its session expires. The
// client's lease length must not exceed the session TTL for its renewal to
// come in time (dlock.Client uses driver.Model.TTLFor).
//
// # Client version
//
// Pinned to go.etcd.io/etcd/client/v3 v3.6.16 and tested against Debian's
// etcd-server 3.4.23 (the whole suite runs against that binary): the v3
// API the store uses (Txn with range comparisons, leases, keepalives,
// watches, Status, MemberList) is the same in 3.4, and 3.6 is the oldest
// line the Go proxy serves with current fixes, the closest to that server.
// v3.7.3 also passed the suite once against the same server; it is not
// pinned because nothing here needs it.
//
// # Where to start
//
// New over your etcd client (or driver.Open with an etcd:// URL), then
// dlock.New; the examples show the order in which to close them.
// docs/etcd.md in the repository has the long form: installation, the URL,
// interoperation with etcdctl, failover behaviour and the tests behind each
// claim.
package etcdstore
