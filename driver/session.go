package driver

import "context"

// SessionKeeper keeps the session of a session-based store (Model.Session)
// alive: an etcd lease, a ZooKeeper session, a database's pinned
// connections. It is for holders of keys that no dlock Client renews (a
// caller of the store itself, drivertest's harness between calls).
//
// The Client does not use it, nor needs it: its renewal loop extends each
// lease (Mutex.Extend or BatchExtender), which renews the session as well
// and confirms the key. Absent: only Extend renews the session, and a
// holding nobody extends lasts as long as the store's session does without
// renewal (Model.SessionTTL, or longer where the server needs none).
type SessionKeeper interface {
	// KeepAlive renews or confirms the store's session with one round trip
	// (per connection, on a store with several), so that every holding of
	// the store outlives the call by the session's TTL. With no session
	// (nothing held) it does nothing and returns nil. If the session is
	// gone it returns NotHeld(false): the store's holdings are lost (on a
	// store with several connections, those of the ones that failed).
	// Other errors mean nothing was confirmed: ctx's, ErrInvalid after the
	// store's Close, or one matching no sentinel.
	KeepAlive(ctx context.Context) error
}
