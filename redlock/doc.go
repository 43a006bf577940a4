// Package redlock is a driver.Mutex that holds each lock on a majority of N
// independent Redis primaries (the Redlock algorithm of the Redis
// documentation, "Distributed Locks with Redis"). Swap it in for the
// single-Redis store without changing the code that locks:
//
//	s, err := redlock.NewRedis(clients, "", nil) // 5 independent primaries
//	c, err := dlock.New(s)
//
// # Algorithm
//
// Every call asks all nodes in parallel, with the same key and the same
// 128-bit owner token everywhere, all nodes bounded by one deadline,
// Options.NodeTimeout (default 50 ms, at most TTL/3) from the start of the
// call. The node calls run on worker goroutines the Store keeps (each exits
// after one to two seconds without work, or at Close), so that in steady
// state a call starts no goroutine; a slow node holds up only its own calls.
//
//   - Acquire succeeds when a majority (N/2+1) granted and validity is left:
//     TTL − elapsed − drift > 0, elapsed measured on the monotonic clock from
//     the start of the call, drift = TTL × DriftFactor + 2 ms (default factor
//     0.01). On failure the key is released on every node that granted or
//     whose outcome is unknown (never on nodes that answered "held by
//     another owner", so a fully contended attempt costs one round trip);
//     dlock's Client then retries after a jittered delay within its wait
//     bound. An unknown outcome is undone by the acquisition's call id
//     (CallUndoer, which RedisNode is): only if that acquisition is what
//     the node holds, so that an undo arriving after Acquire returned
//     cannot take the token's next holding, made through another Store.
//     A contended attempt waits for the nodes' answers until the Remaining
//     it reports (when a majority can next be free) is settled. Any call
//     whose context is already done asks no node.
//   - Extend (and so dlock's renewal) needs a majority within the validity
//     window; when nodes say the token no longer holds the key on enough of
//     them that no majority is possible, the lease is lost at once. When
//     nodes simply do not answer, the lease keeps its current validity and
//     is lost when that runs out, unless a later renewal reaches a majority.
//     Renewal batches go to every node as one pipeline per node, all nodes in
//     parallel.
//   - Release removes one hold where that hold was added (see Re-entry and
//     release below), in parallel, and succeeds when N/2+1 of those nodes
//     released, or all of them if fewer were asked.
//
// # Re-entry and release
//
// A Release(key, token) carries no node list, so the Store keeps its own
// record of each holding it granted, in memory, keyed by key and token: the
// holding's fence, exactly as raised, and one node set per hold (a stack).
// The first acquisition's set is the nodes that granted it, in time or late;
// each re-entry pushes the set of nodes that granted the re-entry. Release
// pops the top set and releases only on those nodes, so releasing a re-entry
// never removes the outer acquisition's hold from a node the re-entry never
// reached; the last Release of the holding asks every node. The sets follow
// the hold counts the nodes report (a node that lost its earlier holds, say
// by restarting empty, leaves the lower sets), so popping a set never frees
// a node that another set still counts. Grant.Holds is the number of sets:
// the Releases still needed.
//
// A re-entry returns the holding's recorded fence, with no extra round trip,
// if it continues the holding: a majority of its grants found the token
// holding the key already (no other holding can have come between there,
// and every majority meets them), or the holding's validity had not run out
// when the re-entry settled. It needs a majority of grants like any
// acquisition, on any nodes: a re-entry that reaches only part of the outer
// holding's nodes (some are down) is granted and counted honestly, each node
// once. A re-entry that does not continue the holding (its validity ran out
// and fewer than a majority still held the key) is a new holding: its fence
// is raised as a first acquisition's is, and it replaces the record.
//
// A token's holding this Store did not grant (acquired through another
// Store, in another process, with the same owner token; or holds left by an
// earlier attempt whose reply was lost, which dlock's Client gives back at
// once) is treated as a new holding: its fence is raised (it then equals the
// holding's fence if every granting node held the key already, and is
// larger otherwise), and its sets are derived from the nodes' hold counts:
// as many as a majority of the granting nodes have holds, the nodes with the
// most holds on top, so releasing the extra holds never frees a node before
// its last hold. (Extra holds on fewer nodes are more likely a release of
// the token still on its way; they stay uncounted and expire with the key.) A Release of a token the
// Store has no record of asks every node, as one release of the whole key:
// release a holding through the Store that acquired it.
//
// A record leaves at the holding's last Release, or, if that never comes
// (the lease was lost), lazily: a lookup drops a record twice the TTL after
// its latest acquisition or extension started, and each insertion sweeps the
// expired records whenever the record count has doubled since the last
// sweep, so memory stays within about twice the live holdings (plus 64
// records). The record is guarded by one mutex, never held across I/O; a
// Store has at most MaxNodes (64) nodes.
//
// The counts are only honest if a node sees a token's calls in the order
// the Store made them, while each call returns once a majority answered:
// every call of a token (acquire, release, and the handling of an
// acquisition's late replies) therefore waits, per node, for the earlier
// ones still in flight there. Calls of different tokens never wait for each
// other.
//
// # Validity and Grant.TTL
//
// dlock's Client computes a lease's validity as start + Grant.TTL − (TTL/100
// + 2 ms), start being the moment it called Acquire. This store therefore
// reports Grant.TTL = TTL − (the part of its drift allowance beyond TTL/100),
// counted from the start of the call, as the driver.Mutex contract asks: every
// node set its expiry after that moment. The lease's remaining validity right
// after Lock is exactly Redlock's TTL − elapsed − drift (checked on a fake
// clock in the tests), with elapsed and drift each counted once.
//
// # Fencing tokens: what they promise
//
// Each node issues its own fences as a single redisstore does: max(last
// fence + 1, the node's TIME in microseconds), the last fence kept in the
// lock's value and, after a release, in its tombstone for the node's
// retention. The nodes' fences diverge: their clocks differ, a failed
// attempt raises the fences of the nodes that granted it, a holding may miss
// a node. Taking the maximum of the majority's fences is therefore not
// monotonic on its own (a test shows a later holding getting a smaller
// maximum). This store gives a new holding the maximum F of its granting
// nodes' fences, records F in its record of the holding, and raises the
// last fence of every node to F with the release that ends the holding
// (FencedReleaser, which RedisNode is: no round trip of its own; a release
// through a Store without the record first asks the nodes for the
// holding's fences). Any later majority shares a node with this one, whose
// last fence is then at least F, so its next grant, and the later holding's
// maximum, exceed F. Until that release no other holding can start on the
// node, and a lock that expires unreleased leaves no fence either way. Over
// nodes that are FenceRaisers but not FencedReleasers the Store raises the
// granting nodes' fences to F right after the grant instead (one more
// round trip; it needs a majority of confirmations or the acquisition
// fails).
//
// The promise is exactly this: fences strictly increase across holdings that
// do not overlap in time, as long as every node in the majorities involved
// either keeps its last fence (the lock or its tombstone; across a crash,
// appendonly yes and appendfsync always) or, where it lost it (its retention
// ended, its lease expired unreleased, or it restarted without its data),
// has a clock in microseconds past the fences issued for the key: true
// unless a node's clock steps back or
// lags the clock of the node that set F by more than the time between the
// two holdings. A node that restarts without its data can hand out a smaller
// fence when the fences ran ahead of the clocks (a test shows it, with
// fences seeded far ahead). Re-entrant acquisitions report the holding's
// fence exactly, from the Store's record, whatever fences the nodes that
// granted them have (see Re-entry and release). The fence raise is a node
// method of this package, not a driver capability: New checks each node
// for the FenceRaiser interface directly, not through driver.As (RedisNode
// has it; a wrapper around a node hides it unless the wrapper has it too). With
// Options.DisableFencing, or any node without it, grants carry Fence 0 (no
// token).
//
// # Restarts
//
// A node restarted without fsync'd persistence has forgotten the locks it
// granted, and a second client can then win a majority that includes it
// while the first still holds (a test shows it). The Redis documentation's
// rule: keep such a node unavailable for at least the longest TTL in use
// (delayed restart), or run every node with appendfsync always. The tests
// enforce the rule with a helper that kills a node and restarts it only
// after the maximum TTL plus the drift allowance.
//
// # Limits
//
// Redlock assumes bounded network delay, bounded process pauses and clocks
// that run at about the same rate; Redis expires keys by wall-clock time. It
// is not a consensus protocol: use the fencing token at the protected
// resource when correctness matters, and see the README's safety model.
// Configure node clients with ClientOptions.
//
// # Capabilities
//
// Model: per-key TTLs of at least 10 ms in milliseconds, with the validity
// counted on the client's clock (ServerClock false). Besides driver.Mutex a
// Store is a driver.Notifier (release wake-ups merged from the nodes),
// driver.BatchExtender (one pipeline per node), driver.Inspector and
// driver.Lister (the majority's view: held only by a token that holds the
// key on a quorum), driver.WaiterCounter (the largest count of any node:
// every waiter subscribes on several nodes, so a sum would count it several
// times) and driver.Doctor (each node's checks, plus node count, quorum,
// independence and fencing). The nodes' driver capabilities are found
// through wrappers with driver.As; a capability the nodes cannot serve
// (nodes that cannot inspect, list, count waiters or notify) answers with an
// error matching errors.ErrUnsupported, and the client falls back as it
// would without it (notify) or the CLI says the store cannot. It is neither a driver.Transferer nor a
// driver.Atomic: the client hands a key over by release and acquire, and
// WithRead and Lease.Commit fall back as those capabilities document.
//
// # URLs
//
// Importing the package registers the scheme redlock with driver.Register:
//
//	redlock://[user:pass@]host:port,host:port,host:port[?query]
//	redlock://?node=redis://host:port&node=rediss://user:pass@host:port[&query]
//
// The first form shares the credentials and go-redis query parameters
// among the nodes; the second gives each node its own redis:// or rediss://
// URL (or bare host:port). Both take prefix=, node-timeout=, drift-factor=
// and fencing=false (see ParseURL). The opener applies ClientOptions to
// every node's client, makes no network call, and its Opened.Close closes
// the store and the clients it made.
//
// # Where to start
//
// NewRedis over one go-redis client per independent primary (each
// configured with ClientOptions), or New over any node stores, then
// dlock.New. docs/redlock.md in the repository has the long form: the
// algorithm, the validity arithmetic, what fencing promises, and the
// restart rule.
package redlock
