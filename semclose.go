package dlock

import "context"

// Close releases every permit still held (their Err then matches
// ErrNotHeld), stops their renewal, ends the waits of Acquire (which then
// return ErrNotAcquired and ErrInvalid) and waits for the background
// give-backs, cancelling them if ctx ends first. Later calls return
// ErrInvalid. It returns the first release error, or ctx's; what was not
// confirmed expires at the end of its lease. It does not close the store.
// Closing twice returns nil.
func (s *Semaphores) Close(ctx context.Context) error { return s.close(ctx) }
