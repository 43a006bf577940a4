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
// The store cannot tell a re-entry from an acquisition whose reply was lost
// and that Lock then retried, so for an owner such a retry counts as one more
// hold; it expires with the key's TTL. Calls without an owner use a fresh
// token per call and give such ghost holds back at once.
type Owner struct{ token string }

// NewOwner returns an owner with a fresh 128-bit token from crypto/rand.
func NewOwner() Owner { return Owner{token: newToken()} }

type ownerKey struct{}

// ContextWithOwner returns a copy of ctx that acquires locks as owner.
func ContextWithOwner(ctx context.Context, owner Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFromContext returns the owner carried by ctx, if any.
func OwnerFromContext(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok && o.token != ""
}

// newToken returns 128 random bits from crypto/rand, URL-safe base64 encoded.
// crypto/rand.Read never fails on supported platforms (Go 1.24+).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
