// Package drivertest is the conformance suite for stores: one suite per
// primitive a store offers (the mutex suite, for driver.Mutex, today).
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
// Run runs, as a subtest named after each primitive ("Mutex"), the suite of
// every primitive the store from New implements. The suite reads the store's
// time and liveness model from Store.Model and adapts to it: the short lease
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
// The suite checks itself: its own tests run it against stores broken on
// purpose (no owner check, no expiry, a fence that does not increase, an
// Extend that re-creates a free key) and require each to fail the case
// that names the rule it breaks, with package memstore as the control that
// must pass.
//
// # Where to start
//
// Run with a Harness whose New returns a new client of one running server;
// ExampleRun is a store's whole conformance test, and every store in the
// repository has one (conformance_test.go). The repository's README.md,
// section "Writing a store", walks through it.
package drivertest
