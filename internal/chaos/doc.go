// Package chaos holds dlock's reliability suite, laid out like etcd's
// tests/robustness: history (the recorder: traffic becomes a history of
// invoke/outcome operations), check (the validators: mutual exclusion, fence
// order, a porcupine lock model, no lost update), faultproxy (network
// failpoints) and, in this package's tests, the scenarios that drive real
// redis-server processes and separate client processes through faults.
//
// The fast scenarios run with go test ./...; the long random fault schedule
// runs with:
//
//	go test -tags chaos -run TestChaos -count=1 -v ./internal/chaos/
//
// See RELIABILITY.md for the table of results.
package chaos
