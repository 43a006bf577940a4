package driver

import "context"

// RWLister enumerates the read-write lock keys a store has state for
// (dlock list --kind rwlock), as Lister does for Mutex keys.
//
// Absent: dlock list cannot show read-write locks (dlock status KEY can,
// with an RWInspector).
type RWLister interface {
	// ListRW calls fn for each RWMutex key with a live holding or a live
	// writer-waiting mark whose name starts with prefix, with its state as
	// InspectRW reports it, in no particular order, until fn returns false
	// or the keys run out. It changes nothing. On error it stops; fn may
	// have been called for some keys before it, and an error matching
	// errors.ErrUnsupported means the store cannot list at the moment.
	ListRW(ctx context.Context, prefix string, fn func(key string, info RWInfo) bool) error
}

// PermitLister enumerates the semaphore keys a store has state for (dlock
// list --kind semaphore), as Lister does for Mutex keys.
//
// Absent: dlock list cannot show semaphores (dlock status KEY can, with a
// PermitInspector).
type PermitLister interface {
	// ListPermits calls fn for each Semaphore key with a permit out whose
	// name starts with prefix, with its state as InspectPermits reports it,
	// in no particular order, until fn returns false or the keys run out.
	// It changes nothing. Errors are as for RWLister.ListRW.
	ListPermits(ctx context.Context, prefix string, fn func(key string, info PermitInfo) bool) error
}
