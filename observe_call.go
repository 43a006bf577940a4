package dlock

import "context"

// CallObserver is an Observer that also sees each observed call as a
// whole, and can give it a context: to group a call's wait and holding
// under one span, say. An Observer that implements it is asked through
// this interface; one that does not is not.
type CallObserver interface {
	Observer
	// BeginCall is called when an observed call begins (after its
	// arguments are checked, before its EventWaitStart), with the
	// caller's ctx. The context it returns replaces ctx for the rest of
	// the call: its events, its store calls, and the function of Do and
	// RDo (whose context derives from it). It must return ctx or a
	// context derived from it (nil is taken as ctx), must be safe for
	// concurrent use and must not block. The call ends with its
	// EventWaitEnd, or, if that says acquired, with the event that ends
	// the holding (EventReleased, EventHandedOff or EventLost).
	BeginCall(ctx context.Context, c Call) context.Context
}

// Call is an observed call as BeginCall sees it.
type Call struct {
	// Name is the method: Lock, TryLock or Do (a Client's, or an RWLocks'
	// write holding), RLock, TryRLock or RDo, Acquire or TryAcquire, or
	// Wait (a Limiter's WaitN).
	Name string
	Kind Kind
	Key  string
}

// The names of the observed calls.
const (
	callLock       = "Lock"
	callTryLock    = "TryLock"
	callDo         = "Do"
	callRLock      = "RLock"
	callTryRLock   = "TryRLock"
	callRDo        = "RDo"
	callAcquire    = "Acquire"
	callTryAcquire = "TryAcquire"
	callWait       = "Wait"
)

// beginCall asks obs, if it is a CallObserver, for the context of the call
// name about key of kind; otherwise, or if it returns nil, it returns ctx.
func beginCall(ctx context.Context, obs Observer, name string, kind Kind, key string) context.Context {
	co, ok := obs.(CallObserver)
	if !ok {
		return ctx
	}
	if cctx := co.BeginCall(ctx, Call{Name: name, Kind: kind, Key: key}); cctx != nil {
		return cctx
	}
	return ctx
}
