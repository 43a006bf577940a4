package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/idemtest"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
)

// The idempotency guard's store-level scenarios (package idemtest, one
// copy for every store) on the lease table: Guard.Do in store mode, the
// records in mysqlstore's table (DoTx has its own, in internal/sqltest).

var _ = roles.Register("idem-payer", idemtest.Payer)

// guardURL returns the mysql:// URL of table on the shared server.
func guardURL(t testing.TB, table string) string {
	return fmt.Sprintf("mysql://%s:%s@%s/%s?table=%s", mysqlserver.User, mysqlserver.Password, shared(t).Addr(), mysqlserver.Database, table)
}

// freshTable returns a fresh, migrated table prefix on the shared server.
func freshTable(t testing.TB) string {
	_, opts := migrated(t, mysqlstore.Options{})
	return opts.Table
}

// TestTwentyDuplicatesChargeOnce (idemtest.Twenty): 20 identical requests
// at once on two idemhttp instances, each on a pool of its own: the
// handler runs once, the others 409 or the replay, another body 422.
// Control: without the middleware, more than one charge.
func TestTwentyDuplicatesChargeOnce(t *testing.T) {
	url := guardURL(t, freshTable(t))
	idemtest.Twenty(t, func(t testing.TB) driver.Idempotency { return idemtest.OpenURL(t, url) })
}

// TestExecutorCrashAfterTheChargeChargesOnce (idemtest.CrashAfterCharge):
// the executor, a child process opened on the table's URL, killed or
// paused after its charge: one charge after the takeover; the paused one
// cannot store its result. Control: a charge keyed by the fence charges
// twice.
func TestExecutorCrashAfterTheChargeChargesOnce(t *testing.T) {
	idemtest.CrashAfterCharge(t, guardURL(t, freshTable(t)), func(t testing.TB, ctx context.Context, env ...string) *faulttest.Child {
		return roles.Start(t, ctx, "idem-payer", env...)
	})
}

// myFaults is the shared server as idemtest.LostReplies sees it: each
// Guard's store a pool of its own, without a read timeout (a delayed
// reply is only late: a begin that waits for another's row lock takes
// longer than the 150 ms Redis' clients allow), faults 4 times further
// apart than on Redis (a begin is a transaction of several round trips,
// a connection's handshake several more), at most 6 rounds.
func myFaults(t *testing.T) idemtest.FaultStore {
	table := freshTable(t)
	return idemtest.FaultStore{Addr: shared(t).Addr(), Spread: 4, MaxRounds: 6, Open: func(t testing.TB, addr string, _ int) driver.Idempotency {
		db := openDB(t, mysqlserver.DSNFor(addr, mysqlserver.Database))
		s, err := mysqlstore.New(db, mysqlstore.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() }) // before the pool's
		return s
	}}
}

// TestGuardLostRepliesNeverRunTwice (idemtest.LostReplies) behind the
// fault proxy: never two executions at once, never a completed key run
// again, never a wrong replay. Control:
// TestGuardLostRepliesControlStartsOnSilence.
func TestGuardLostRepliesNeverRunTwice(t *testing.T) {
	idemtest.LostReplies(t, myFaults(t))
}

// TestGuardLostRepliesControlStartsOnSilence (idemtest.LostRepliesControl):
// a store client that takes a begin without an answer for a start must
// show a violation.
func TestGuardLostRepliesControlStartsOnSilence(t *testing.T) {
	idemtest.LostRepliesControl(t, myFaults(t))
}
