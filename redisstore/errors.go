package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// refusals are the server's error replies that retrying cannot fix, by the
// start of their message. Everything else (connection errors, timeouts,
// LOADING, READONLY, CLUSTERDOWN, TRYAGAIN, …) stays unclassified, which
// the core treats as unavailable and retries.
var refusals = []struct{ prefix, what string }{
	{"NOTALOCK", "the key holds a value that is not a dlock lock (another program's key, or a lock written by an older layout of this package)"},
	{"WRONGTYPE", "a key of the lock is not a string (another program's key, or a lock written by an older layout of this package)"},
	{"NOPERM", "the Redis user lacks a permission the lock needs (see `dlock doctor`)"},
	{"The user executing the script can't", "the Redis user lacks a permission the lock's scripts need (see `dlock doctor`)"},
	{"NOAUTH", "the server requires authentication"},
	{"WRONGPASS", "authentication failed"},
	{"DB index is out of range", "the URL's database number (redis://host:port/N) does not exist on this server (its databases setting; 16 by default: 0 to 15)"},
	{"ERR unknown command", "the server does not know a command the lock needs"},
	{"ERR unknown subcommand", "the server does not know a command the lock needs"},
}

// classify returns err, wrapped with driver.ErrRefused and a message naming
// key if the server refused the call in a way retrying cannot fix. Only
// server error replies are classified: a transport error is never a
// refusal. A script's error reply may carry "ERR " or "Error running
// script" before the code, so the code is looked for after those too.
func classify(err error, key string) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	if i := strings.Index(msg, "): "); strings.HasPrefix(msg, "Error running script") && i >= 0 {
		msg = msg[i+3:]
	}
	for _, r := range refusals {
		if strings.HasPrefix(msg, r.prefix) || strings.HasPrefix(err.Error(), r.prefix) {
			return fmt.Errorf("%w: lock %q: %s: %w", driver.ErrRefused, key, r.what, err)
		}
	}
	return err
}

// retryWindow is how long after a command first ran go-redis may still
// resend it, read from the client's options: each resend waits for a write
// and a read timeout at most, plus a backoff. 0 if the client does not say
// (a Ring, a wrapper) or does not resend.
func retryWindow(c redis.UniversalClient) time.Duration {
	retries, per, _ := retryOptions(c)
	if retries <= 0 {
		return 0
	}
	return time.Duration(retries) * per
}

// resends reports whether c may send a command again after its first run
// (go-redis's retries): true unless c is a *redis.Client or
// *redis.ClusterClient with them turned off (MaxRetries, MaxRedirects -1).
func resends(c redis.UniversalClient) bool {
	retries, _, known := retryOptions(c)
	return !known || retries > 0
}

// retryOptions reads c's retry count and the longest wait of one retry;
// known is false for a client whose options it cannot read.
func retryOptions(c redis.UniversalClient) (retries int, per time.Duration, known bool) {
	var rt, wt, backoff time.Duration
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		retries, rt, wt, backoff = o.MaxRetries, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := c.Options()
		retries, rt, wt, backoff = o.MaxRedirects, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	default:
		return 0, 0, false
	}
	return retries, max(rt, 0) + max(wt, 0) + max(backoff, 0), true
}
