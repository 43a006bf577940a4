package main

import (
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// sessionLeaseWarning is the warning run prints when --lease was given but
// the store keeps locks in a session (m.Session), so that the lease has no
// effect: it names what does set the lock's lifetime on storeURL's store.
// It is "" when the store honours --lease.
//
// A warning, not a refusal: scripts that pass --lease and choose the store
// by DLOCK_STORE keep working on every store, and the lock is as safe
// either way; only how long it outlives a crashed dlock differs.
func sessionLeaseWarning(storeURL string, m driver.Model, lease time.Duration) string {
	if !m.Session {
		return ""
	}
	scheme := strings.ToLower(schemeOf(storeURL))
	life := fmt.Sprintf("its locks live as long as the client's session (TTL %v)", m.SessionTTL)
	var how string
	switch scheme {
	case "etcd", "etcds":
		how = "set it with the URL parameter session-ttl= (e.g. ?session-ttl=30s)"
	case "zk":
		how = "set it with the URL parameter session-timeout= (e.g. ?session-timeout=30s)"
	case "postgres", "postgresql", "mysql":
		life = fmt.Sprintf("its session locks live as long as the database connection (checked every %v)", m.SessionTTL)
		how = "no URL parameter changes that; ?mode=lease gives per-key leases that --lease sets"
	default:
		how = "see the store's URL parameters"
	}
	return fmt.Sprintf("warning: --lease %v has no effect on this %s store: %s; %s", lease, scheme, life, how)
}
