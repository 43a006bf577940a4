package driver

import "context"

// RWBatchExtender renews many read-write lock holdings in one round trip
// (a pipeline), as PermitBatchExtender does for semaphores. The renewal
// loop of an RWLocks uses it when a tick renews more than one holding.
//
// Absent: the renewal loop calls ExtendRW once per holding.
type RWBatchExtender interface {
	// ExtendRWBatch behaves like calling ExtendRW for each request,
	// returning one result per request in the same order (len(reqs)
	// results, also when the round trip fails: then each result carries
	// the error). A result's Grant has the holding's Fence, Holds 1 and
	// the TTL. It has no error of its own.
	ExtendRWBatch(ctx context.Context, reqs []ExtendRequest) []ExtendResult
}
