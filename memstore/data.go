package memstore

import (
	"context"
	"fmt"

	"example.com/dlock/driver"
)

// The store also keeps string resources (the protected data), so that code
// using dlock.WithRead and Lease.Commit can be tested without a server:
// Set and Get stand in for the data store's own commands.

var _ driver.Atomic = (*Store)(nil)

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
func (s *Store) value(resource string) driver.Value {
	v, ok := s.data[resource]
	return driver.Value{Data: v, Found: ok}
}

// Apply implements driver.Atomic: the lock step and the resource write and
// read happen under one hold of the store's mutex. A step whose lock part
// fails returns that part's error (as Acquire, Transfer or Release) and
// reads and writes nothing. It performs an Acquire with an optional Read, a
// Transfer with an optional Write and Read, and a Release with an optional
// Write; any other step (an Acquire with a Write, a Release with a Read, an
// unknown Action) returns an error matching driver.ErrInvalid and changes
// nothing.
func (s *Store) Apply(ctx context.Context, st driver.Step) (driver.Grant, driver.Value, error) {
	var op func() (driver.Grant, error)
	switch {
	case st.Action == driver.Acquire && st.Write == nil:
		op = func() (driver.Grant, error) { return s.acquire(st.Key, st.Token, st.TTL, driver.MetaFrom(ctx)) }
	case st.Action == driver.Transfer:
		op = func() (driver.Grant, error) { return s.transfer(st.Key, st.Token, st.To, st.TTL) }
	case st.Action == driver.Release && st.Read == "":
		op = func() (driver.Grant, error) { return driver.Grant{}, s.release(st.Key, st.Token) }
	default:
		return driver.Grant{}, driver.Value{}, fmt.Errorf("%w: memstore: unsupported step (action %d, write %t, read %q)", driver.ErrInvalid, st.Action, st.Write != nil, st.Read)
	}
	resource, value := "", ""
	if st.Write != nil {
		resource, value = st.Write.Resource, st.Write.Value
	}
	return s.withData(ctx, op, resource, value, st.Read)
}

// withData runs op and, if it succeeded, writes value to resource (if not
// empty) and reads read (if not empty), all in one hold of s.mu: nobody sees
// the lock changed without the data, and a refused op writes nothing.
func (s *Store) withData(ctx context.Context, op func() (driver.Grant, error), resource, value, read string) (driver.Grant, driver.Value, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := op()
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	if resource != "" {
		s.data[resource] = value
	}
	if read == "" {
		return g, driver.Value{}, nil
	}
	return g, s.value(read), nil
}
