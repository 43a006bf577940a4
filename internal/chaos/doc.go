// Package chaos holds dlock's reliability suite, laid out like etcd's
// tests/robustness: history (the recorder: traffic becomes a history of
// invoke/outcome operations), check (the validators: mutual exclusion, fence
// order, a porcupine lock model, no lost update, liveness), faultproxy
// (network failpoints) and, in this package's tests, the scenarios that drive
// real redis-server processes and separate client processes through faults.
//
// Two kinds of traffic feed the checkers: the seed's stock workers (lock,
// fenced read and write, release; in app processes, under a random fault
// schedule), and the composed traffic of composed_test.go (re-entry with
// random TTLs, Extend shorter and longer than the lease, Commit, waits
// cancelled mid-call and panics inside Do, in-process, each worker with its
// own fault proxy). The composed operations run in their full ranges, each
// of which found a defect before the issue-13 fixes (e6e2101);
// DLOCK_CHAOS_COMPOSED=safe narrows them to what that version handled (see
// composed_test.go).
//
// The read-write lock and semaphore traffic (rw_traffic_test.go,
// semaphore_traffic_test.go, on the kit of family_traffic_test.go and
// family_run_test.go) mixes their operations with the same kinds of
// composed operations and lost replies, and is checked by
// check.WriterOverlaps, check.PermitsOver and check.FenceInversions, each
// with a broken store that must fail. It runs on every store that has the
// primitive (family_stores_test.go): Redis, memstore, etcd, ZooKeeper,
// PostgreSQL and MariaDB, each started by its internal/... harness.
//
// The fast scenarios run with go test ./...; the long random fault schedule
// runs with:
//
//	go test -tags chaos -run TestChaos -count=1 -v ./internal/chaos/
//
// and the composed traffic alone (the issue-13 operations, full ranges) with:
//
//	go test -run TestComposed -count=1 -v ./internal/chaos/
//
// See RELIABILITY.md for the table of results.
package chaos
