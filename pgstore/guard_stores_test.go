package pgstore_test

import (
	"context"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/idemtest"
)

// The idempotency guard's store-level scenarios (package idemtest, one
// copy for every store) on the lease table: Guard.Do in store mode, the
// records in pgstore's table (DoTx has its own, in internal/sqltest).

var _ = roles.Register("idem-payer", idemtest.Payer)

// guardURL returns the URL of a fresh, migrated table prefix on the
// package's server, reached at addr (the server's, or a fault proxy's),
// with a pool of up to 16 connections.
func guardURL(t testing.TB, table, addr string) string {
	return server(t).URLFor(addr) + "&table=" + table + "&pool_max_conns=16"
}

// TestTwentyDuplicatesChargeOnce (idemtest.Twenty): 20 identical requests
// at once on two idemhttp instances, each on a pool of its own: the
// handler runs once, the others 409 or the replay, another body 422.
// Control: without the middleware, more than one charge.
func TestTwentyDuplicatesChargeOnce(t *testing.T) {
	url := guardURL(t, uniqTable(t, newPool(t)), server(t).Addr())
	idemtest.Twenty(t, func(t testing.TB) driver.Idempotency { return idemtest.OpenURL(t, url) })
}

// TestExecutorCrashAfterTheChargeChargesOnce (idemtest.CrashAfterCharge):
// the executor, a child process opened on the table's URL, killed or
// paused after its charge: one charge after the takeover; the paused one
// cannot store its result. Control: a charge keyed by the fence charges
// twice.
func TestExecutorCrashAfterTheChargeChargesOnce(t *testing.T) {
	url := guardURL(t, uniqTable(t, newPool(t)), server(t).Addr())
	idemtest.CrashAfterCharge(t, url, func(t testing.TB, ctx context.Context, env ...string) *faulttest.Child {
		return roles.Start(t, ctx, "idem-payer", env...)
	})
}

// pgFaults is the package's server as idemtest.LostReplies sees it: each
// Guard's store a pool of its own (pgx has no read timeout: a delayed
// reply is only late), faults 4 times further apart than on Redis (a
// connection's handshake takes several round trips), at most 6 rounds.
func pgFaults(t *testing.T) idemtest.FaultStore {
	table := uniqTable(t, newPool(t))
	return idemtest.FaultStore{Addr: server(t).Addr(), Spread: 4, MaxRounds: 6, Open: func(t testing.TB, addr string, _ int) driver.Idempotency {
		return idemtest.OpenURL(t, guardURL(t, table, addr))
	}}
}

// TestGuardLostRepliesNeverRunTwice (idemtest.LostReplies) behind the
// fault proxy: never two executions at once, never a completed key run
// again, never a wrong replay. Its control (idemtest.LostRepliesControl)
// runs on MariaDB and Redis, where it is cheaper: the harness is the
// same; here the run fails unless begins lost their replies and keys
// completed.
func TestGuardLostRepliesNeverRunTwice(t *testing.T) {
	idemtest.LostReplies(t, pgFaults(t))
}
