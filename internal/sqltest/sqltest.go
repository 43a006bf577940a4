// Package sqltest is the test kit shared by the SQL stores' tests
// (pgstore, mysqlstore): the idempotency guard's SQL mode (DoTx) checked
// the same way on each database, each check with its negative control.
// A store's tests supply a Backend (its server, its pools, its SQL for the
// business table) and call the checks; what a database is stays in its
// tests. It imports no SQL driver, so that the root module gains none.
//
// The business table of every check is <prefix>_charges, one row per
// charge made and no unique constraint, so that a second execution shows
// as a second row.
package sqltest

import (
	"context"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
)

// Tx is a business transaction (or the pool, outside any) as the checks
// use it.
type Tx interface {
	// Charge writes one row of key to <prefix>_charges.
	Charge(ctx context.Context, key string, fence uint64) error
	// Work is 20 ms of work on the server in the transaction (pg_sleep,
	// DO SLEEP): it widens a race's window.
	Work(ctx context.Context) error
	// Unbound lifts the server's bound on the transaction's idle time
	// (Backend.Idle), for a negative control.
	Unbound(ctx context.Context) error
}

// TxFunc is a DoTx function: it writes through tx.
type TxFunc func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error)

// Mode is how DoTx begins the record.
type Mode int

const (
	// Folded begins the record in the business transaction (the default).
	Folded Mode = iota
	// TwoStep begins it in a transaction of its own, committed first.
	TwoStep
)

func (m Mode) String() string { return [...]string{"Folded", "TwoStep"}[m] }

// Broken names a store broken for a negative control.
type Broken int

const (
	// Sound is the store as it is.
	Sound Broken = iota
	// NoFenceCheck completes the record in the transaction whoever owns it.
	NoFenceCheck
	// WaitingBegin makes the folded begin wait for the record's row (or
	// its uncommitted insert) instead of answering in flight.
	WaitingBegin
)

// Guard is one instance of a service: a store on a pool of its own and
// a Guard on it.
type Guard interface {
	// DoTx is pgguard.DoTx or myguard.DoTx with fn's tx seen as a Tx.
	DoTx(ctx context.Context, key, fingerprint string, mode Mode, fn TxFunc) (dlock.Result, error)
	// Plain runs fn in a plain transaction of the pool and commits.
	Plain(ctx context.Context, fn func(context.Context, Tx) error) error
	// Outside is the pool: its writes commit at once, outside DoTx's
	// transaction.
	Outside() Tx
	// Charges counts the business rows of key.
	Charges(t testing.TB, key string) int
}

// Counter counts what a pool sends: round trips (statements, once
// prepared) and commits (COMMIT and statements outside a transaction),
// from the pool's start.
type Counter interface {
	Count(t testing.TB) (roundTrips, commits int)
}

// Backend is one database under test.
type Backend interface {
	// Table returns a fresh, migrated table prefix with an empty business
	// table <prefix>_charges.
	Table(t testing.TB) string
	// Guard opens an instance on table, its store broken as asked, its
	// Guard made with opts (retention: an hour).
	Guard(t testing.TB, table string, broken Broken, opts ...dlock.Option) Guard
	// Idle opens an instance on table whose folded transactions the
	// server ends once idle for bound (the way each database's docs say
	// to bound them), its Guard made with opts.
	Idle(t testing.TB, table string, bound time.Duration, opts ...dlock.Option) Guard
	// Counted opens an instance on table whose pool Counter counts: one
	// connection, no sweeps, statements once prepared in one round trip.
	Counted(t testing.TB, table string) (Guard, Counter)
	// StartExecutor starts the test binary's executor role (a role that
	// calls RunExecutor with the backend's opener) with env added.
	StartExecutor(t testing.TB, ctx context.Context, env ...string) *faulttest.Child
}

// ctx returns a context that ends with the test, or after a minute.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}
