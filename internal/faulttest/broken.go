package faulttest

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
)

// The broken stores of the negative controls: each wraps a real store and
// breaks one promise, so that a test that passes on the store fails on
// the wrapper.

// QueueBatcher is a store with the queue and batch-extend capabilities
// (etcdstore and zkstore), as Overclaim needs.
type QueueBatcher interface {
	driver.Mutex
	driver.Queuer
	driver.BatchExtender
}

// Overclaim reports every grant of Store certain for More longer than the
// store does (as a store counting from a late reply, or from nothing,
// would). Its Model claims a session TTL longer by More too, or the Client
// would cap every lease at the real one (and hide the overclaim). Release
// and every other capability are the store's (Unwrap).
type Overclaim struct {
	Store QueueBatcher
	More  time.Duration
}

// Unwrap returns the store, whose other capabilities the Client uses.
func (o Overclaim) Unwrap() driver.Store { return o.Store }

// Model is the store's, with SessionTTL longer by More.
func (o Overclaim) Model() driver.Model {
	m := o.Store.Model()
	m.SessionTTL += o.More
	return m
}

// Acquire is the store's, with the grant's TTL longer by More.
func (o Overclaim) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := o.Store.Acquire(ctx, key, token, ttl)
	g.TTL += o.More
	return g, err
}

// AcquireQueued is the store's, with the grant's TTL longer by More.
func (o Overclaim) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := o.Store.AcquireQueued(ctx, key, token, ttl)
	g.TTL += o.More
	return g, err
}

// Extend is the store's, with the grant's TTL longer by More.
func (o Overclaim) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := o.Store.Extend(ctx, key, token, ttl)
	g.TTL += o.More
	return g, err
}

// Release is the store's.
func (o Overclaim) Release(ctx context.Context, key, token string) error {
	return o.Store.Release(ctx, key, token)
}

// ExtendBatch is the store's, with every grant's TTL longer by More.
func (o Overclaim) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	rs := o.Store.ExtendBatch(ctx, reqs)
	for i := range rs {
		rs[i].Grant.TTL += o.More
	}
	return rs
}

// NoOwnerCheck is the broken lock of the overlap tests' negative controls:
// Acquire grants a held key too (fence 1, half the session TTL), and
// Extend and Release of a key another owner holds report success. It
// hides the store's capabilities (no Unwrap).
type NoOwnerCheck struct{ driver.Mutex }

// grant is what NoOwnerCheck makes up.
func (n NoOwnerCheck) grant() driver.Grant {
	return driver.Grant{Fence: 1, Holds: 1, TTL: n.Mutex.Model().SessionTTL / 2}
}

// Acquire is the store's, but a key another owner holds is granted too.
func (n NoOwnerCheck) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.Mutex.Acquire(ctx, key, token, ttl)
	if errors.Is(err, driver.ErrNotAcquired) {
		return n.grant(), nil
	}
	return g, err
}

// Extend is the store's, but ErrNotHeld becomes a grant.
func (n NoOwnerCheck) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := n.Mutex.Extend(ctx, key, token, ttl)
	if errors.Is(err, driver.ErrNotHeld) {
		return n.grant(), nil
	}
	return g, err
}

// Release is the store's, but ErrNotHeld becomes success.
func (n NoOwnerCheck) Release(ctx context.Context, key, token string) error {
	if err := n.Mutex.Release(ctx, key, token); !errors.Is(err, driver.ErrNotHeld) {
		return err
	}
	return nil
}

// ExtendEach is ExtendBatch for a wrapper whose Extend breaks a promise:
// it calls extend (the wrapper's Extend) for each request in order.
func ExtendEach(ctx context.Context, extend func(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error), reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		out[i].Grant, out[i].Err = extend(ctx, r.Key, r.Token, r.TTL)
	}
	return out
}
