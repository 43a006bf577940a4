package dlock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Tokens are bearer secrets: formatting a Lease or an Owner with fmt (%v,
// %+v, %#v, %s) shows a short one-way digest of the token instead, enough to
// tell holders apart in logs without being able to release their locks.

// String describes the lease by key, fence, hold count and a token digest.
func (l *Lease) String() string {
	if l == nil {
		return "dlock.Lease(nil)"
	}
	return fmt.Sprintf("dlock.Lease{key=%q fence=%d holds=%d owner=%s}", l.key, l.fence, l.holds, tokenDigest(l.token))
}

// GoString is like String, so that %#v does not print the token either.
func (l *Lease) GoString() string { return l.String() }

// String shows a digest of the owner's token, not the token.
func (o Owner) String() string { return "dlock.Owner{" + tokenDigest(o.token) + "}" }

// GoString is like String.
func (o Owner) GoString() string { return o.String() }

// TokenDigest returns the first 12 hex digits of the token's SHA-256: a
// stable, non-reversible name for a token in logs and status output. An
// empty token (a holder whose token the store does not know) gives "-".
//
// Deprecated: String and GoString of Lease and Owner print it; nothing else
// needs it. It stays for compatibility.
func TokenDigest(token string) string { return tokenDigest(token) }

func tokenDigest(token string) string {
	if token == "" {
		return "-"
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}
