package main

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
)

// TestRunLeaseOnEtcdWarnsOfSessionTTL: --lease on etcd, whose locks live in
// the session, is not silently ignored: run warns and names session-ttl=,
// then runs the command. Controls: without --lease nothing is said, and on
// Redis (per-key leases) --lease gives no warning.
func TestRunLeaseOnEtcdWarnsOfSessionTTL(t *testing.T) {
	store, _ := etcdStore(t)
	r := runDlock(t, nil, "run", "--store", store, "--key", "job", "--lease", "1h", "--", "echo", "ran")
	if r.code != 0 || !strings.Contains(r.stdout, "ran") ||
		!strings.Contains(r.stderr, "--lease 1h0m0s has no effect") || !strings.Contains(r.stderr, "session-ttl=") {
		t.Errorf("--lease on etcd: want the command run and a warning naming session-ttl=; got %v", r)
	}
	if r := runDlock(t, nil, "run", "--store", store, "--key", "job", "--", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("no --lease on etcd: want silence; got %v", r)
	}
	if r := runDlock(t, nil, "run", "--store", redisserver.Start(t).URL(), "--key", "job", "--lease", "5s", "--", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("--lease on Redis: want silence; got %v", r)
	}
}

// TestSessionLeaseWarningNamesTheParameter: each session store's warning
// names what sets its lifetime; a per-key store gets none.
func TestSessionLeaseWarningNamesTheParameter(t *testing.T) {
	session := driver.Model{Session: true, SessionTTL: 4 * time.Second}
	for url, want := range map[string]string{
		"etcd://h:2379/locks":  "session-ttl=",
		"zk://h:2181/locks":    "session-timeout=",
		"postgres://u@h/db":    "?mode=lease",
		"mysql://u@h/db":       "?mode=lease",
		"etcds://h:2379/locks": "session-ttl=",
	} {
		if got := sessionLeaseWarning(url, session, time.Hour); !strings.Contains(got, want) {
			t.Errorf("%s: warning %q does not name %q", url, got, want)
		}
	}
	if got := sessionLeaseWarning("redis://h:6379", driver.Model{MinTTL: time.Millisecond}, time.Hour); got != "" {
		t.Errorf("a per-key store: got warning %q", got)
	}
}
