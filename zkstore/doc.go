// Package zkstore is a dlock store on ZooKeeper (driver.Mutex on the session
// model) with the node layout of Apache Curator's InterProcessMutex, so that
// dlock clients and Curator services on the JVM exclude each other and wait
// in one queue. It is also a read-write lock (driver.RWMutex) in the layout
// of Curator's InterProcessReadWriteLock, and a semaphore (driver.Semaphore)
// in that of InterProcessSemaphoreV2.
//
// # Layout
//
// Lock name N lives at the lock path Options.Root + "/" + N (Root defaults
// to /dlock; Options.Prefix goes in front of N). Every "/"-separated part of
// N that ZooKeeper accepts in a path is kept as it is, so a Curator
// InterProcessMutex on /dlock/orders/42 and the dlock key "orders/42" meet;
// other characters are escaped as %XX (see docs/zookeeper.md). A holder or
// waiter is a child node _c_<UUID>-lock-<sequence>, EPHEMERAL_SEQUENTIAL,
// the UUID canonical (36 characters with dashes) and new for each create;
// the lock path and its parents are created as container nodes, which the
// server deletes once empty. Children are ordered as Curator orders them: by
// the text after the last "lock-", compared as strings. The first lock node
// holds the lock. A child is a lock node when its name ends in "lock-" and
// a ZooKeeper sequence (what %010d prints for a 32-bit number: 10 digits,
// or a minus sign and 9 or 10); other children (the lock path of a nested
// name, a/b under a) are not participants for this store, so a and a/b are
// independent locks. Curator counts every child, and so waits where dlock
// would not: more exclusion, never less. A name (Prefix included) with a
// "/"-separated part after the first that is itself named like a lock node,
// such as "n1/x-lock-0000000001", would hold the name before it, so every
// call of the store refuses it with an error matching driver.ErrInvalid,
// before any request.
//
// The node data is "dlock/1 <holds> <digest>[ <fence>]": the hold count
// and 16 bytes of the token's SHA-256, never the token, and after a
// Transfer the holding's fence; then, for a holding with holder metadata
// (dlock.WithMeta, driver.MetaKeeper), a newline and the metadata. Inspect
// therefore recognises the store's own holdings, reads any holder's
// metadata, and reports a node with other data (Curator writes the
// client's IP address) as held by a foreign client, token unknown, with
// that data as its metadata.
// Re-entry by the holding token is a conditional setData of the count on
// the node, so the count survives in ZooKeeper and a Release by the token
// works from any Store; the Store also keeps its nodes' paths and versions in
// memory, so that re-entry, Extend and Release are one request each.
//
// # Fence
//
// A holding's fence is a zxid, which the ensemble orders across every path
// and every leader epoch (the epoch is its high 32 bits): the later of the
// lock node's czxid (the zxid of the transaction that created it) and the
// lock path's pzxid in the listing that found the node first (the zxid of
// the last creation or deletion of a child, so at least that of the
// predecessor's deletion). A listing that shows our node reflects its
// creation, so that is the pzxid, and the store does not spend a request
// reading the czxid. After a Transfer it is the zxid of the
// transfer's write, kept in the node's data. Each holding of a name thus
// gets a greater fence than all before it, also a waiter whose node was
// queued before its predecessor handed the lock on locally (its czxid alone
// would be smaller: TestQueuedHolderFenceAboveEarlierTransfer). The pzxid
// is not in the node: only the holder's own Store knows it until its next
// write to the node (a re-entry writes it into the data). Inspect from
// another Store (dlock status in another process) reports the node's czxid
// meanwhile. That equals the fence when no child of the lock path was
// created or deleted between the holder's create and its granting listing
// (a free lock taken with no one arriving), and is smaller otherwise (a
// waiter's grant): a known inconsistency, kept because carrying the fence
// in the node would cost every such grant a write
// (TestGrantFenceIsTheListingsPzxid pins both readings).
// The sequence number is not used: it is
// per lock path, restarts when the container is deleted and recreated, and
// wraps at 2^31.
//
// # Sequence wrap
//
// ZooKeeper prints the sequence with %010d of the parent's signed 32-bit
// child version, which counts every create and delete under the lock path:
// after 2^31 of them (about a billion acquisitions of one name while its
// path never empties) sequences are negative, sort first as strings, and
// sort among themselves backwards. Curator then admits two holders. This
// store refuses to hold or wait on a lock path that has a negative sequence
// (an error matching driver.ErrUnavailable) until the path empties and the
// server deletes it, which restarts the counter.
//
// # Session
//
// All holdings of a Store live in the session of its zk.Conn. driver.Model
// says Session, ServerClock and SessionTTL = the session timeout the server
// granted (Dial and Negotiated learn it from the connect response, as
// go-zookeeper does not expose it). A reply to a request that goes through
// the leader (a write, or a sync) confirms the session as of the moment the
// request was sent: the server touched the session when the request
// arrived, later, and expires it only a full timeout after its last touch.
// Replies to reads confirm nothing: a follower cut off from the leader goes
// on answering reads for up to syncLimit ticks while the leader may expire
// the session. A Grant's TTL is therefore counted from the send time of the
// last such request the server answered, plus the timeout, minus
// Options.Margin (a quarter of the timeout by default: a follower reports
// touches to the leader every half tickTime, and a follower that answers
// and then dies may not have). So the dlock Lease reports its loss before
// the ensemble can delete the node and hand the lock to the next waiter
// (TestLostSignalBeforeHandover measures both).
//
// A lost connection is "not sure": no reply, nothing confirmed, the lease's
// validity runs out unless the connection comes back in time. An expired
// session loses every holding in it: go-zookeeper then opens a new session
// on the same Conn by itself; the store sees the new session id and drops
// its holdings of the old one, whose Extend and Release return
// driver.NotHeld, and later acquisitions use the new session. This is the
// same on a conn passed to New, which the store never closes.
//
// Because go-zookeeper pings the server on its own, the session (and so
// every node of the Store) stays alive as long as the conn is open, even
// when no Extend is made: a holding ends with Release, the session's
// expiry, or Close of a Store made by Dial (which closes the conn).
//
// # Calls
//
// Acquire lists the lock path; if it has lock nodes it returns a
// *driver.ContendedError (Remaining -1: ZooKeeper keeps no expiry per lock)
// without writing. Otherwise it creates its node, then lists the path and
// nothing else (its node's owner session is the conn's, its version 0, its
// fence the listing's pzxid: see Fence); if another node got in first it
// deletes its node. AcquireQueued (driver.Queuer) creates its node, then
// watches only the node before it until it is first (a children watch on
// that node, which fires only on its deletion: an exists watch would also
// fire on each setData of a holder's re-entry or local handoff):
// FIFO, no herd, Curator's waiters in the same queue. A create that loses
// its connection is recovered as Curator's protected mode does: the
// children are listed and the node with the attempt's UUID adopted if the
// conn's session owns it, deleted if not; a node whose fate stays unknown is
// deleted by the next call on that lock path. Extend is a sync then an
// exists on the node, no write (concurrent ones share them; ExtendBatch
// sends them together); a waiter's listing after a wake-up has a sync
// beside it unless a recent leader-confirmed reply already makes the
// session certain for half its timeout (a stale listing cannot hide a
// deletion before our node, only our own session's expiry). Release
// is one setData or delete guarded by the node's data version; if the
// connection fails the holding is kept and the error says the outcome is
// unknown, so a retried Release finishes it (CURATOR-678). Transfer
// (driver.Transferer, a Client's hand-off to a local waiter) rewrites the
// holder node's digest in one conditional setData: the node keeps its place.
//
// go-zookeeper's calls take no context. Each call here runs its requests
// in a goroutine and returns when ctx ends; the request itself goes on until
// the conn answers or gives up (its receive timeout, two thirds of the
// session timeout), and a create that completes after its caller left is
// deleted.
//
// # Read-write lock
//
// Read-write lock name N lives at Options.RWRoot + "/" + N (default
// /dlock-rw), apart from the mutexes. Each reader and writer, holding or
// queued, is an EPHEMERAL_SEQUENTIAL node _c_<UUID>-__READ__<sequence> or
// _c_<UUID>-__WRIT__<sequence>, ordered by the text after the marker, as
// Curator's InterProcessReadWriteLock names and orders them: a reader holds
// when no writer's node is before its own, a writer when its node is first.
// A holding is granted by a setData on its node, whose zxid is the fence.
// The writer-waiting mark of driver.RWMutex is a refused writer's node left
// in the queue (a queued Curator writer is one too), deleted
// driver.WriterWaitTTL after the token's last AcquireWrite through this
// Store. A downgrade creates a reader's node named with the writer's
// sequence before deleting the writer's node, so writers queued meanwhile
// stay out (Curator 5.4 lets one in: CURATOR-621). AcquireReadQueued and
// AcquireWriteQueued wait in the queue watching one node each; SubscribeRW
// watches the lock path. A token's read-write holding is re-entered,
// extended and retried through the Store that took it.
//
// # Semaphore
//
// Semaphore name N lives at Options.SemRoot + "/" + N (default
// /dlock-sem): a mutex at N/locks and one EPHEMERAL_SEQUENTIAL lease node
// _c_<UUID>-lease-<sequence> per permit at N/leases, as Curator's
// InterProcessSemaphoreV2 lays them out. AcquirePermits tries the mutex,
// counts the leases, and creates its k lease nodes with the limit (stored
// on the leases node) in one multi, whose zxid is the fence. An
// acquisition that finds the mutex taken is refused if its permits are not
// free, and otherwise waits for the mutex (at most 5 s); a name with a part after the first named
// "locks" or "leases" is refused with driver.ErrInvalid.
//
// # What it cannot do
//
// No Notifier for the mutex (waiters queue instead), no Atomic step, no
// RWInspector nor PermitInspector. A token that holds a
// name through another Store (another session) cannot extend it here (an
// error matching driver.ErrInvalid) nor re-enter it (Acquire reports
// contention; AcquireQueued waits until that holding ends); Release works.
// Contended errors carry no remaining time. The session timeout is bounded
// by the server (2 to 20 tickTimes by default: 4 s to 40 s).
//
// # Where to start
//
// Dial (a Store that owns its connection) or New over your zk.Conn, then
// dlock.New; the example shows the order in which to close them.
// docs/zookeeper.md in the repository has the long form: installation, the
// URL, interoperation with Curator, faults, and the tests behind each claim.
package zkstore
