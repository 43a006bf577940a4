package drivertest_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// refSessionTTL is the session length of refSession: short, so that the
// session cases of the suite run in about a second.
const refSessionTTL = 600 * time.Millisecond

// refSession is one client of a session-based refStore: every holding it
// takes lasts refSessionTTL from its session's last keepalive (Acquire or
// Extend of any of its keys), as an etcd lease or ZooKeeper session does.
// It keeps no keepalive running, so a client that stops calling (Kill)
// loses its keys one session TTL after its last call.
type refSession struct {
	*refStore

	mu     sync.Mutex
	tokens map[string]bool
	forgot map[string]bool // tokens dropped by sessionForgetsEnded
	dead   bool
}

var errKilled = errors.New("refSession: client killed")

func newRefSession(r *refStore) *refSession {
	return &refSession{refStore: r, tokens: map[string]bool{}, forgot: map[string]bool{}}
}

func (c *refSession) Model() driver.Model {
	return driver.Model{MinTTL: time.Millisecond, Granularity: time.Millisecond, ServerClock: true, Session: true, SessionTTL: refSessionTTL}
}

func (c *refSession) alive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errKilled
	}
	return nil
}

// keepalive renews every holding of the session. Called with c.refStore.mu
// held.
func (c *refSession) keepalive() {
	if c.mut == sessionNoRenew {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	until := time.Now().Add(refSessionTTL)
	for _, l := range c.locks {
		if c.tokens[l.token] && time.Now().Before(l.expires) {
			l.expires = until
		}
	}
}

func (c *refSession) Acquire(ctx context.Context, key, token string, _ time.Duration) (driver.Grant, error) {
	if err := c.alive(); err != nil {
		return driver.Grant{}, err
	}
	c.mu.Lock()
	c.tokens[token] = true
	c.mu.Unlock()
	g, err := c.refStore.Acquire(ctx, key, token, refSessionTTL)
	if err == nil {
		c.refStore.mu.Lock()
		c.keepalive()
		c.refStore.mu.Unlock()
	}
	return g, err
}

func (c *refSession) Extend(ctx context.Context, key, token string, _ time.Duration) (driver.Grant, error) {
	if err := c.alive(); err != nil {
		return driver.Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	c.refStore.mu.Lock()
	defer c.refStore.mu.Unlock()
	l, err := c.owned(key, token)
	if err != nil {
		return driver.Grant{}, err
	}
	c.keepalive()
	return driver.Grant{Fence: l.fence, Holds: l.holds, TTL: refSessionTTL}, nil
}

func (c *refSession) Release(ctx context.Context, key, token string) error {
	if err := c.alive(); err != nil {
		return err
	}
	if c.mut == sessionForgetsEnded {
		// The bug: the client drops what it knows of the holding when the
		// call's context has ended (as a store that discards the connection
		// or session state behind it would), so nothing renews it and a
		// later Release finds nothing to release.
		c.mu.Lock()
		forgot := c.forgot[token]
		if ctx.Err() != nil {
			delete(c.tokens, token)
			c.forgot[token] = true
		}
		c.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		if forgot {
			return driver.NotHeld(false)
		}
	}
	return c.refStore.Release(ctx, key, token)
}

func (c *refSession) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	for i, q := range reqs {
		res[i].Grant, res[i].Err = c.Extend(ctx, q.Key, q.Token, q.TTL)
	}
	return res
}

func (c *refSession) AcquireQueued(ctx context.Context, key, token string, _ time.Duration) (driver.Grant, error) {
	if err := c.alive(); err != nil {
		return driver.Grant{}, err
	}
	c.mu.Lock()
	c.tokens[token] = true
	c.mu.Unlock()
	return c.refStore.AcquireQueued(ctx, key, token, refSessionTTL)
}

// keepAliveHook is the harness's KeepAlive: it renews every holding of the
// session, as a background keepalive would, also under the sessionNoRenew
// mutation (whose Extend renews nothing): the suite must stop this renewal
// in SessionExtendRenews for that mutant to fail it. A killed client fails.
func (c *refSession) keepAliveHook(ctx context.Context) error {
	if err := c.alive(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.refStore.mu.Lock()
	defer c.refStore.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	until := time.Now().Add(refSessionTTL)
	for _, l := range c.locks {
		if c.tokens[l.token] && time.Now().Before(l.expires) {
			l.expires = until
		}
	}
	return nil
}

// kill abandons the client: no more calls, no more keepalives. With the
// sessionOutlivesKill mutation its holdings never end instead.
func (c *refSession) kill() {
	c.mu.Lock()
	c.dead = true
	tokens := c.tokens
	c.mu.Unlock()
	if c.mut != sessionOutlivesKill {
		return
	}
	c.refStore.mu.Lock()
	defer c.refStore.mu.Unlock()
	for _, l := range c.locks {
		if tokens[l.token] {
			l.expires = time.Now().Add(time.Hour)
		}
	}
}
