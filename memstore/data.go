package memstore

import (
	"context"
	"time"

	"example.com/dlock"
)

// The store also keeps string resources (the protected data), so that code
// using dlock.WithRead and Lease.Commit can be tested without a server:
// Set and Get stand in for the data store's own commands.

var (
	_ dlock.GrantReader = (*Store)(nil)
	_ dlock.Committer   = (*Store)(nil)
)

// Set stores value under resource, as a data store's SET would.
func (s *Store) Set(resource, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[resource] = value
}

// Get returns the value of resource and whether it exists.
func (s *Store) Get(resource string) (value string, found bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	value, found = s.data[resource]
	return value, found
}

// value reads resource. Called with s.mu held.
func (s *Store) value(resource string) dlock.Value {
	v, ok := s.data[resource]
	return dlock.Value{Data: v, Found: ok}
}

// AcquireRead implements dlock.GrantReader.
func (s *Store) AcquireRead(ctx context.Context, key, token string, ttl time.Duration, resource string) (dlock.Grant, dlock.Value, error) {
	return s.withData(ctx, func() (dlock.Grant, error) { return s.acquire(key, token, ttl) }, "", "", resource)
}

// TransferRead implements dlock.GrantReader.
func (s *Store) TransferRead(ctx context.Context, key, from, to string, ttl time.Duration, resource string) (dlock.Grant, dlock.Value, error) {
	return s.withData(ctx, func() (dlock.Grant, error) { return s.transfer(key, from, to, ttl) }, "", "", resource)
}

// ReleaseWrite implements dlock.Committer.
func (s *Store) ReleaseWrite(ctx context.Context, key, token, resource, value string) error {
	_, _, err := s.withData(ctx, func() (dlock.Grant, error) { return dlock.Grant{}, s.release(key, token) }, resource, value, "")
	return err
}

// TransferWrite implements dlock.Committer.
func (s *Store) TransferWrite(ctx context.Context, key, from, to string, ttl time.Duration, resource, value, read string) (dlock.Grant, dlock.Value, error) {
	return s.withData(ctx, func() (dlock.Grant, error) { return s.transfer(key, from, to, ttl) }, resource, value, read)
}

// withData runs op and, if it succeeded, writes value to resource (if not
// empty) and reads read (if not empty), all in one hold of s.mu: nobody sees
// the lock changed without the data, and a refused op writes nothing.
func (s *Store) withData(ctx context.Context, op func() (dlock.Grant, error), resource, value, read string) (dlock.Grant, dlock.Value, error) {
	if err := ctx.Err(); err != nil {
		return dlock.Grant{}, dlock.Value{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := op()
	if err != nil {
		return dlock.Grant{}, dlock.Value{}, err
	}
	if resource != "" {
		s.data[resource] = value
	}
	if read == "" {
		return g, dlock.Value{}, nil
	}
	return g, s.value(read), nil
}
