package inventory

import "fmt"

// StrategyInfo explains a strategy to someone who has not read the articles:
// what it does, and what it proves or what goes wrong with it.
type StrategyInfo struct {
	Does  string // what the strategy does, in the demo's terms
	Shows string // what it proves, or its hole and the scenario that shows it
}

// strategyInfo holds the explanation of every strategy the service knows,
// the store strategies included.
var strategyInfo = map[string]StrategyInfo{
	"nolock": {"Reads the stock and writes stock − 1, with no lock at all.",
		"The problem itself: two requests read the same stock and the second write undoes the first sale (a lost update)."},
	"local": {"An in-process mutex: each instance (a separate process) has its own.",
		"A lock that only one process sees excludes nothing in the other instance: updates are still lost."},
	"v1": {"The articles' first Redis lock: SETNX on the lock key, DEL when done; refuses the buyer at once if the key is taken.",
		"Keeps the stock right but turns buyers away; a holder that dies before its DEL leaves the lock forever (crash scenario: deadlock)."},
	"v2": {"SET NX EX 30 (the lock now expires), DEL when done; refuses at once.",
		"A crash no longer blocks forever, but a holder that outlives its lease deletes the next holder's lock (slow-holder scenario)."},
	"v3": {"A random owner token: GET the lock, compare, then DEL; refuses at once.",
		"The check and the delete are two commands: a lease that ends between them still deletes another holder's lock (slow-holder)."},
	"v4": {"A Lua compare-and-delete: deletes the lock only while it is still its own; refuses at once.",
		"Never deletes another holder's lock, but work that outlasts the lease runs unprotected; buyers are still turned away."},
	"v5": {"v4 plus a timer renewing the lease every half lease until the write (a watchdog).",
		"Survives long work; still turns buyers away, and is unsafe across a Redis failover (not shown by this demo)."},
	"redlock": {"RedLock.net's call from the articles: a majority of 3 Redis nodes, 30 s expiry, waiting up to 20 s and retrying every second.",
		"Waits instead of refusing, so every buyer is served, but by polling: slow. Its safety rests on clocks and on nodes that do not lose the lock when they restart (not shown)."},
	"dlock": {"This library: a blocking Lock woken when the holder releases, a watchdog renewing the lease, and the stock written only with a fencing token not older than the last writer's.",
		"Every item sold, none lost, no buyer turned away; a holder that lost its lock cannot overwrite a newer sale."},
	"dlock-commit": {"The same lock, with the stock read together with the grant and written by the release itself, only while the lock is still held.",
		"The same guarantees as dlock with fewer round trips to Redis per sale: faster."},
	EtcdStrategy: {"dlock's Lock over etcd (the key layout of etcdctl lock); the stock stays in Redis, written with the lock's fencing token (the key's revision).",
		"The same code as dlock on another store: every item sold, none lost; a dead holder's lock is freed when its etcd session expires."},
	ZooKeeperStrategy: {"dlock's Lock over ZooKeeper (the node layout of Curator's InterProcessMutex); the stock stays in Redis, written with the lock's fencing token.",
		"The same code as dlock on another store: every item sold, none lost; a dead holder's node goes with its session."},
	SQLLeaseStrategy: {"dlock's Lock over a lease table in PostgreSQL or MySQL (expiry on the database's clock); the stock stays in Redis, written with the lock's fencing token.",
		"The same code as dlock on another store: every item sold, none lost, waiters woken by the release."},
	SQLForUpdateStrategy: {"The articles' database lock: each sale inside a transaction holding SELECT … FOR UPDATE NOWAIT on the lock's row; refuses at once when the row is locked.",
		"Keeps the stock right (the lock dies with the connection) but turns buyers away, like v1–v5, where sql-lease waits and serves them."},
}

// Explain returns what strategy does and what it proves. A strategy this
// package does not know gets a placeholder that says so.
func Explain(strategy string) StrategyInfo {
	if in, ok := strategyInfo[strategy]; ok {
		return in
	}
	return StrategyInfo{Does: fmt.Sprintf("(%s: a strategy this report has no description of)", strategy), Shows: "—"}
}

// Mark is the verdict's mark and its text equivalent: ✔ pass (stock right,
// every request served), ~ partial (stock right, requests refused or a
// recovery after a crash), ✘ fail (lost updates, overselling, a lock that
// did not exclude, a deadlock).
func Mark(kind string) (mark, word string) {
	switch kind {
	case KindCorrect:
		return "✔", "pass"
	case KindFailed:
		return "~", "partial"
	}
	return "✘", "fail"
}
