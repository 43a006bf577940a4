package dlock

import (
	"context"

	"example.com/dlock/driver"
)

// Close releases every holding still held (their Err then matches
// ErrNotHeld), stops their renewal, ends the waits of RLock and Lock (which
// then return ErrNotAcquired and ErrInvalid) and waits for the background
// give-backs, cancelling them if ctx ends first. Later calls return
// ErrInvalid. It returns the first release error, or ctx's; what was not
// confirmed expires at the end of its lease. It does not close the store.
// Closing twice returns nil.
func (l *RWLocks) Close(ctx context.Context) error { return l.close(ctx) }

// rwCtxKey maps to the *rwCtx of the innermost RDo or Do whose function got
// the context.
type rwCtxKey struct{}

// rwCtx is a holding that a context carries, and the one it derives from.
type rwCtx struct {
	h     *RWHolding
	outer *rwCtx
}

// RDo takes a read holding of key as RLock does, runs fn with a context
// that is cancelled, cause ErrLost, if the holding is lost, and releases
// the holding when fn returns or panics. It returns the acquisition error
// (fn did not run), or fn's error joined with the release's, matching
// ErrLost if the holding was lost while fn ran. Within fn, Lock, TryLock and
// Do of key with fn's context return ErrUpgrade at once, and RLock, TryRLock
// and RDo ErrInvalid. A nil fn returns ErrInvalid before any I/O.
func (l *RWLocks) RDo(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	return l.do(ctx, callRDo, key, driver.RWRead, fn, opts)
}

// Do takes the write holding of key as Lock does and runs fn as RDo does;
// within fn, every acquisition of key with fn's context returns ErrInvalid
// at once.
func (l *RWLocks) Do(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	return l.do(ctx, callDo, key, driver.RWWrite, fn, opts)
}

func (l *RWLocks) do(ctx context.Context, name, key string, mode driver.RWMode, fn func(context.Context) error, opts []Option) error {
	if fn == nil {
		return invalidf("nil function")
	}
	ctx, h, err := l.lock(ctx, name, key, mode, false, opts)
	if err != nil {
		return err
	}
	outer, _ := ctx.Value(rwCtxKey{}).(*rwCtx)
	return runHeld(ctx, context.WithValue(ctx, rwCtxKey{}, &rwCtx{h, outer}), h.ttl, h.v.OnLost, h.Release, fn)
}
