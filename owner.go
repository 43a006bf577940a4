package dlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
)

// Owner is a logical lock holder. Go has no thread identity, so ownership is
// explicit: a lock acquired with a context that carries an Owner is held by
// that owner, and acquiring it again with the same owner re-enters it
// (incrementing a hold count) instead of waiting for itself.
//
// Do passes such a context to its function, so nested Do or Lock calls on the
// same key re-enter. Share an owner only with work that belongs to the same
// logical holder: every goroutine with the owner's context holds its locks.
//
// An owner's holdings of one key share one record in the store; the Client
// keeps any of them from shortening another (an Extend or renewal asks the
// store for at least what the others need) and gives back, once the
// owner's last live holding of the key ends, the holds no holding accounts
// for: one of a lease that ended without a confirmed release, or of an
// acquisition whose reply was lost (the store cannot tell a re-entry from a
// retried acquisition). Calls without an owner use a fresh token per call
// and give such ghost holds back at once. Both hold for the holdings of one
// Client: use an owner with one Client per store.
type Owner struct{ token string }

// NewOwner returns an owner with a fresh 128-bit token from crypto/rand.
func NewOwner() Owner { return Owner{token: newToken()} }

// ownerKey maps to a *Lease in the context Do passes to its function (the
// lease's token is the owner: one value serves OwnerFromContext and
// LeaseFromContext, and costs Do no allocation), or to an ownerValue.
type ownerKey struct{}

// ownerValue is what ContextWithOwner stores: the owner, and the lease of
// the Do whose context it derives from, if any, so that LeaseFromContext
// still finds it.
type ownerValue struct {
	owner Owner
	lease *Lease
}

// ContextWithOwner returns a copy of ctx that acquires locks as owner.
func ContextWithOwner(ctx context.Context, owner Owner) context.Context {
	l, _ := LeaseFromContext(ctx)
	return context.WithValue(ctx, ownerKey{}, ownerValue{owner, l})
}

// OwnerFromContext returns the owner carried by ctx, if any.
//
// Deprecated: an owner is set with ContextWithOwner and used by Lock, TryLock
// and Do; nothing else needs to read it back. It stays for compatibility.
func OwnerFromContext(ctx context.Context) (Owner, bool) { return ownerFromContext(ctx) }

// ownerFromContext returns the owner carried by ctx, if any.
func ownerFromContext(ctx context.Context) (Owner, bool) {
	switch v := ctx.Value(ownerKey{}).(type) {
	case *Lease:
		return Owner{v.token}, true
	case ownerValue:
		return v.owner, v.owner.token != ""
	}
	return Owner{}, false
}

// LeaseFromContext returns the lease of the innermost Do whose function got
// ctx (or a context derived from it), or nil and false. The lease is Do's to
// release (docs/api.md#leasefromcontext).
func LeaseFromContext(ctx context.Context) (*Lease, bool) {
	switch v := ctx.Value(ownerKey{}).(type) {
	case *Lease:
		return v, true
	case ownerValue:
		return v.lease, v.lease != nil
	}
	return nil, false
}

// newToken returns 128 random bits from crypto/rand, URL-safe base64 encoded.
// crypto/rand.Read never fails on supported platforms (Go 1.24+).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
