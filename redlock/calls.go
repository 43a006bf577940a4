package redlock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// CallUndoer is the node capability that lets a Store undo exactly its own
// failed acquisition on a node. A node whose acquisition's outcome is
// unknown (an error, or no answer before the Store decided) may or may not
// hold the key for the token; a plain Release there could take a later
// holding of the same token instead (its acquisition through another
// Store, after this one returned). When every node implements CallUndoer
// (RedisNode does), each acquisition carries a call id of its own and such
// a node is undone with UndoAcquire, which removes nothing but that
// acquisition's hold. The Store then calls AcquireCall, never Acquire: a
// wrapper that embeds a RedisNode and overrides Acquire must override
// AcquireCall too (or hide the capability by embedding driver.Mutex).
type CallUndoer interface {
	// AcquireCall is driver.Mutex.Acquire recording call, an id unique to
	// this acquisition, in the node's state.
	AcquireCall(ctx context.Context, key, token string, ttl time.Duration, call string) (driver.Grant, error)
	// UndoAcquire removes the hold that acquisition call of token added to
	// key, only if that acquisition is the last call that changed key on
	// the node; otherwise it changes nothing. It reports whether it removed
	// a hold. Errors mean the node could not be reached or failed.
	UndoAcquire(ctx context.Context, key, token, call string) (bool, error)
}

var (
	//go:embed undo_acquire.lua
	undoSrc    string
	undoScript = redis.NewScript(undoSrc)
)

var _ CallUndoer = (*RedisNode)(nil)

// UndoAcquire implements CallUndoer with one script call (see
// undo_acquire.lua): a hold it removes is released as a Release would,
// leaving a tombstone for the node's retention and waking waiters when it
// was the last one. Its error, if any, is go-redis's as is (the hold may or
// may not have been removed); it does not validate key.
func (n *RedisNode) UndoAcquire(ctx context.Context, key, token, call string) (bool, error) {
	lock, _ := n.Keys(key)
	ret := strconv.FormatInt(max(n.Retention().Milliseconds(), 1), 10)
	v, err := undoScript.Run(ctx, n.client, []string{lock}, token, call, lock+":released", ret).Int64()
	return v == 1, err
}

// newCallPrefix returns a random prefix for a Store's call ids: unique
// across processes, so that a call id names one acquisition wherever the
// token is used.
func newCallPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "rl" + hex.EncodeToString(b[:]) + "."
}

// newCall returns a fresh call id for one acquisition, or "" when some node
// is not a CallUndoer.
func (s *Store) newCall() string {
	if s.callPrefix == "" {
		return ""
	}
	return s.callPrefix + strconv.FormatUint(s.callSeq.Add(1), 36)
}

// acquireOn runs one node's part of an acquisition: AcquireCall when call
// is set, else Acquire.
func (s *Store) acquireOn(ctx context.Context, i int, key, token string, ttl time.Duration, call string) (driver.Grant, error) {
	if call != "" {
		return s.nodes[i].(CallUndoer).AcquireCall(ctx, key, token, ttl, call)
	}
	return s.nodes[i].Acquire(ctx, key, token, ttl)
}

// undoOn undoes an acquisition's effect on node i: a grant (granted) is
// released with Release, which takes one of the token's holds there and
// leaves the count of any other holding of the token right. An unknown
// outcome is undone with UndoAcquire when call is set; otherwise it is
// released with Release only if late is false (the acquisition has not
// returned yet, so no later call of the token can have come: see
// lateCleanup), and left to expire with the key otherwise.
func (s *Store) undoOn(ctx context.Context, i int, key, token, call string, granted, late bool) error {
	switch {
	case granted:
		return s.nodes[i].Release(ctx, key, token)
	case call != "":
		_, err := s.nodes[i].(CallUndoer).UndoAcquire(ctx, key, token, call)
		return err
	case !late:
		return s.nodes[i].Release(ctx, key, token)
	}
	return nil
}
