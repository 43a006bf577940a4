// Package drivertest is the conformance suite for stores: one suite per
// primitive a store offers (the mutex suite, for driver.Mutex, the
// semaphore suite, for driver.Semaphore, the read-write lock suite, for
// driver.RWMutex, the rate limiter suite, for driver.RateLimiter, and the
// idempotency suite, for driver.Idempotency, today; see the repository's
// docs/semaphore.md, docs/rwlock.md, docs/ratelimit.md and
// docs/idempotency.md for the latter four's cases).
// Every store of the repository runs it (memstore;
// redisstore on one server, Cluster and Sentinel; redlock; etcdstore;
// zkstore; pgstore's lease table, on a pgx pool and on a *sql.DB, and its
// session lock; mysqlstore's lease table and session lock), and a
// third-party store can too. A store's test file gives a Harness (how to
// make a client of one running server, and optional hooks) and calls Run:
//
//	func TestConformance(t *testing.T) {
//		srv := startServer(t) // a real server, stopped by t.Cleanup
//		drivertest.Run(t, drivertest.Harness{
//			New: func(t *testing.T) driver.Store {
//				s := mystore.New(srv.Addr()) // a new client on each call
//				t.Cleanup(func() { s.Close() })
//				return s
//			},
//			Pause:   func(t *testing.T) func() { srv.Stop(); return srv.Start },
//			Foreign: func(t *testing.T, key string) { srv.Set(key, "not a lock") },
//		})
//	}
//
// Run runs, as a subtest named after each primitive ("Mutex",
// "Semaphore", "RWMutex", "RateLimiter", "Idempotency"), the suite of every primitive the store from New
// implements. The suite reads the store's time and liveness model from
// Store.Model and adapts to it: the short lease
// of the expiry cases is max(150 ms, MinTTL) rounded up to Granularity;
// session-based stores skip the per-key TTL cases and run the session cases
// instead. A session-based store should be a driver.SessionKeeper (or set
// Harness.KeepAlive): the suite then renews each client's session between
// calls, as a client holding keys would, so that a realistic session TTL
// survives a stall of the machine; the session cases stop that renewal where
// they check the store's own. Each case is named after the rule of
// driver.Mutex or of a capability's documentation that it checks, and fails
// with what the store did. Capabilities are found with driver.As; a case for
// a capability the store lacks is skipped and says so.
//
// Real time is used throughout, with every bound widened by Harness.Slack.
// Each case uses its own keys, so one server serves the whole run; cases
// run one after the other.
//
// # The model-based case
//
// ModelRandomHoldingsNeverOverlapAndFreeTheKey drives the store through
// package dlock's Client: generated runs of several owners (some on Clients
// of their own, on separate clients of the store, as separate processes)
// taking one key with Lock, TryLock and Do nested to random depth, with and
// without an Owner, Extend shorter and longer than the lease, renewed and
// fixed leases, releases with live and ended contexts, cancelled waits, lost
// requests and replies (a fault wrapper at the driver.Mutex seam) and
// Close. It checks two invariants: while a lease reports itself valid, no
// other owner holds the key; once every holding has ended, the key is free
// within the give-back bound (2 s plus Harness.Slack). Each run prints its
// seed. CI's size is about 8 s of runs per store (20 s where a mutant must be caught by it); a longer run:
//
//	DLOCK_MODEL_TIME=10m go test -timeout 20m -run 'TestConformance/Mutex/ModelRandom' ./redisstore
//
// DLOCK_MODEL_RUNS=n makes exactly n runs, and DLOCK_MODEL_SEED=n replays the
// run of seed n (the same operations; the timing may differ). The schedules
// the model found first have deterministic cases of their own (per-key
// stores: NestedExtendShorterKeepsOuterHeld, NestedShortRenewalKeepsOuterHeld,
// OuterRenewalKeepsInnerFixedLeaseHeld; session stores:
// ReleaseWithEndedContextFreesSessionKey, NestedFixedLeaseEndingFreesSessionKey;
// every store: LostNestedHoldingThenHandoffFreesTheKey).
//
// The suite checks itself: its own tests run it against stores broken on
// purpose (no owner check, no expiry, a fence that does not increase, an
// Extend that re-creates a free key; for ReleaseWithEndedContextChangesNothing,
// a Release that ignores its ended context and releases, and a session client
// that forgets the holding on an ended Release so that a live one frees
// nothing; for BreakerFreesTheKeyAndFencesKeepRising, a Break that restarts
// the fence counter; for the model case, a Release that frees every hold, an Extend that
// sets half the expiry asked, a Release that frees nothing; for the semaphore,
// no limit, another limit admitted, a partial grant, no expiry, a stuck fence,
// one expiry shared by all holdings; for the read-write lock, a writer that
// leaves no mark, one expiry shared by all holdings, a writer admitted with
// readers, a stuck fence, a downgrade that ends the holding, an upgrade
// refused as taken; for the rate limiter, a denied request
// charged, no burst, one more than the burst, no limit, a partial grant,
// state never expired, clients deciding on their own skewed clocks; for
// idempotency records, no fence check on completion, no fingerprint check, a
// takeover that keeps the fence, a lease that never passes, a second
// executor admitted) and
// require each to fail the case that
// names the rule it breaks, with package memstore as the control that must
// pass.
//
// # Where to start
//
// Run with a Harness whose New returns a new client of one running server;
// ExampleRun is a store's whole conformance test, and every store in the
// repository has one (conformance_test.go). The repository's README.md,
// section "Writing a store", walks through it.
package drivertest
