package dlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// commitStore is readStore with Committer; reads records the read argument
// of every TransferWrite.
type commitStore struct {
	*readStore
	reads []string
}

func (s *commitStore) put(resource, value string) {
	s.vmu.Lock()
	s.values[resource] = value
	s.vmu.Unlock()
}

func (s *commitStore) ReleaseWrite(ctx context.Context, key, token, resource, value string) error {
	if s.holder(key) != token {
		return s.Release(ctx, key, token) // the same refusal, nothing written
	}
	s.put(resource, value)
	return s.Release(ctx, key, token)
}

func (s *commitStore) TransferWrite(ctx context.Context, key, from, to string, ttl time.Duration, resource, value, read string) (driver.Grant, driver.Value, error) {
	s.reads = append(s.reads, read)
	if s.holder(key) != from {
		_, err := s.Transfer(ctx, key, from, to, ttl)
		return driver.Grant{}, driver.Value{}, err
	}
	s.put(resource, value)
	g, err := s.Transfer(ctx, key, from, to, ttl)
	if err != nil || read == "" {
		return g, driver.Value{}, err
	}
	v, err := s.value(read)
	return g, v, err
}

// Commit hands the lock to a local waiter with the write folded in: a waiter
// reading the same resource gets the written value without a read; one
// reading another resource gets that one's value, read by the store.
func TestCommitHandsOffWithTheWrite(t *testing.T) {
	st := &commitStore{readStore: &readStore{miniStore: newMiniStore(), values: map[string]string{"r": "0", "o": "other"}}}
	c, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l0, err := c.Lock(ctx, "k", WithRead("r"))
	if err != nil {
		t.Fatal(err)
	}
	w1 := lockReadAsync(c, ctx, "k", "r")
	waitQueued(t, c, "k", 1)
	if err := l0.Commit(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	r1 := <-w1
	if r1.err != nil {
		t.Fatal(r1.err)
	}
	if v, ok := r1.l.Value(); v != "1" || !ok || r1.l.Fence() <= l0.Fence() || len(st.reads) != 1 || st.reads[0] != "" {
		t.Fatalf("same-resource waiter read %q %v, fence %d→%d, TransferWrite reads %q; want 1, a greater fence, no read sent",
			v, ok, l0.Fence(), r1.l.Fence(), st.reads)
	}
	w2 := lockReadAsync(c, ctx, "k", "o")
	waitQueued(t, c, "k", 1)
	if err := r1.l.Commit(ctx, "2"); err != nil {
		t.Fatal(err)
	}
	r2 := <-w2
	if r2.err != nil {
		t.Fatal(r2.err)
	}
	if v, _ := r2.l.Value(); v != "other" || len(st.reads) != 2 || st.reads[1] != "o" {
		t.Fatalf("other-resource waiter read %q with TransferWrite reads %q; want other, read o", v, st.reads)
	}
	// r2's lease read "o": Commit writes there, and frees the key.
	if err := r2.l.Commit(ctx, "3"); err != nil {
		t.Fatal(err)
	}
	if v, _ := st.value("r"); v.Data != "2" || st.holder("k") != "" {
		t.Fatalf("resource r = %q, holder %q; want 2 and free", v.Data, st.holder("k"))
	}
	if v, _ := st.value("o"); v.Data != "3" {
		t.Fatalf("resource o = %q, want 3", v.Data)
	}
}

// Commit needs a store that can write with the release, and a lease that
// read with its grant; otherwise it refuses before any I/O and the lease
// stays held.
func TestCommitRefusesWithoutAtomicOrRead(t *testing.T) {
	ctx := context.Background()
	rs := newMiniStore() // not a driver.Atomic: WithRead reads nothing
	cs := &commitStore{readStore: &readStore{miniStore: newMiniStore(), values: map[string]string{}}}
	for _, tc := range []struct {
		name string
		st   driver.Mutex
		opts []Option
	}{
		{"store without Atomic", rs, []Option{WithRead("r")}},
		{"lease without WithRead", cs, nil},
	} {
		c, err := New(tc.st)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Lock(ctx, "k", tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		calls := rs.calls.Load() + cs.calls.Load()
		if err := l.Commit(ctx, "v"); !errors.Is(err, ErrInvalid) || l.Err() != nil {
			t.Fatalf("%s: Commit = %v, lease err %v; want ErrInvalid and still held", tc.name, err, l.Err())
		}
		if n := rs.calls.Load() + cs.calls.Load(); n != calls {
			t.Fatalf("%s: refused Commit made %d store calls", tc.name, n-calls)
		}
		if err := l.Commit(nil, "v"); !errors.Is(err, ErrInvalid) { //nolint:staticcheck // nil context on purpose
			t.Fatalf("%s: Commit(nil ctx) = %v, want ErrInvalid", tc.name, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var nilLease *Lease
	if err := nilLease.Commit(ctx, "v"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("nil lease Commit = %v, want ErrNotHeld", err)
	}
}

// Apply serves the write steps, and the read ones through readStore.
func (s *commitStore) Apply(ctx context.Context, st driver.Step) (driver.Grant, driver.Value, error) {
	switch {
	case st.Write == nil:
		return s.readStore.Apply(ctx, st)
	case st.Action == driver.Release:
		return driver.Grant{}, driver.Value{}, s.ReleaseWrite(ctx, st.Key, st.Token, st.Write.Resource, st.Write.Value)
	}
	return s.TransferWrite(ctx, st.Key, st.Token, st.To, st.TTL, st.Write.Resource, st.Write.Value, st.Read)
}
