package dlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// readStore is miniStore with GrantReader: resources live in values; the
// resource "bad" is refused as ErrInvalid, as Redis refuses a cross-slot key.
type readStore struct {
	*miniStore
	vmu          sync.Mutex
	values       map[string]string
	transferRead atomic.Int64
}

func (s *readStore) value(resource string) (driver.Value, error) {
	if resource == "bad" {
		return driver.Value{}, invalidf("bad resource")
	}
	s.vmu.Lock()
	defer s.vmu.Unlock()
	v, ok := s.values[resource]
	return driver.Value{Data: v, Found: ok}, nil
}

func (s *readStore) AcquireRead(ctx context.Context, key, token string, ttl time.Duration, resource string) (driver.Grant, driver.Value, error) {
	v, err := s.value(resource)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	g, err := s.Acquire(ctx, key, token, ttl)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	return g, v, nil
}

func (s *readStore) TransferRead(ctx context.Context, key, from, to string, ttl time.Duration, resource string) (driver.Grant, driver.Value, error) {
	s.transferRead.Add(1)
	v, err := s.value(resource)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	g, err := s.Transfer(ctx, key, from, to, ttl)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	return g, v, nil
}

func lockReadAsync(c *Client, ctx context.Context, key, resource string) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := c.Lock(ctx, key, WithRead(resource))
		ch <- lockResult{l, err}
	}()
	return ch
}

// A local waiter with WithRead gets, through the handoff, the value written
// by the previous holder just before it released.
func TestHandoffReadsTheValueForTheWaiter(t *testing.T) {
	st := &readStore{miniStore: newMiniStore(), values: map[string]string{"r": "v1"}}
	c, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l0, err := c.Lock(ctx, "k", WithRead("r"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := l0.Value(); v != "v1" || !ok {
		t.Fatalf("first holder read %q, %v; want v1", v, ok)
	}
	w := lockReadAsync(c, ctx, "k", "r")
	waitQueued(t, c, "k", 1)
	st.vmu.Lock()
	st.values["r"] = "v2" // the holder's write
	st.vmu.Unlock()
	if err := l0.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-w
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Release(ctx)
	if v, ok := r.l.Value(); v != "v2" || !ok || st.transferRead.Load() != 1 || r.l.Fence() <= l0.Fence() {
		t.Fatalf("waiter read %q, %v after %d TransferRead calls (fences %d→%d); want v2 by one handoff and a greater fence",
			v, ok, st.transferRead.Load(), l0.Fence(), r.l.Fence())
	}
}

// A waiter whose resource the store refuses does not break the holder's
// release: the key is freed and the waiter gets ErrInvalid.
func TestHandoffWithARefusedResourceFreesTheKey(t *testing.T) {
	st := &readStore{miniStore: newMiniStore(), values: map[string]string{}}
	c, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l0, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	w := lockReadAsync(c, ctx, "k", "bad")
	waitQueued(t, c, "k", 1)
	if err := l0.Release(ctx); err != nil {
		t.Fatalf("holder's release with a refused handoff: %v", err)
	}
	r := <-w
	if !errors.Is(r.err, ErrInvalid) || r.l != nil || st.transferRead.Load() != 1 {
		t.Fatalf("waiter got %v, %v after %d TransferRead calls; want ErrInvalid after one", r.l, r.err, st.transferRead.Load())
	}
	if h := st.holder("k"); h != "" {
		t.Fatalf("key still held by %q", h)
	}
	l, err := c.TryLock(ctx, "k") // the local slot was given back too
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
}

// Apply serves the read steps (driver.Atomic).
func (s *readStore) Apply(ctx context.Context, st driver.Step) (driver.Grant, driver.Value, error) {
	switch {
	case st.Action == driver.Acquire && st.Write == nil:
		return s.AcquireRead(ctx, st.Key, st.Token, st.TTL, st.Read)
	case st.Action == driver.Transfer && st.Write == nil:
		return s.TransferRead(ctx, st.Key, st.Token, st.To, st.TTL, st.Read)
	}
	return driver.Grant{}, driver.Value{}, invalidf("readStore: no writes")
}
