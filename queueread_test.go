package dlock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// atomicQueueStore is a queueStore with driver.Atomic (Acquire with Read,
// Release with Write and Read) over resources kept under the queueStore's
// mutex, so that a write lands only with the holder's release.
type atomicQueueStore struct {
	*queueStore
	data    map[string]string
	applies atomic.Int64
}

func (s *atomicQueueStore) value(res string) driver.Value {
	if res == "" {
		return driver.Value{}
	}
	d, ok := s.data[res]
	return driver.Value{Data: d, Found: ok}
}

func (s *atomicQueueStore) Apply(_ context.Context, st driver.Step) (driver.Grant, driver.Value, error) {
	s.applies.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st.Action {
	case driver.Acquire:
		g, ok := s.take(st.Key, st.Token, st.TTL)
		if !ok {
			return driver.Grant{}, driver.Value{}, &dlock.ContendedError{Remaining: -1}
		}
		return g, s.value(st.Read), nil
	case driver.Release:
		if s.owner[st.Key] != st.Token {
			return driver.Grant{}, driver.Value{}, driver.NotHeld(s.owner[st.Key] != "")
		}
		if st.Write != nil {
			s.data[st.Write.Resource] = st.Write.Value // before the key goes to the queue's head
		}
		err := s.releaseLocked(st.Key, st.Token)
		return driver.Grant{}, s.value(st.Read), err
	}
	return driver.Grant{}, driver.Value{}, fmt.Errorf("%w: action %d", driver.ErrInvalid, st.Action)
}

// readingQueueStore adds driver.QueueReader: AcquireQueued, then the read
// (once granted, only the token itself could write the resource).
type readingQueueStore struct {
	*atomicQueueStore
	queueReads atomic.Int64
}

func (s *readingQueueStore) AcquireQueuedRead(ctx context.Context, key, token string, ttl time.Duration, res string) (driver.Grant, driver.Value, error) {
	s.queueReads.Add(1)
	g, err := s.AcquireQueued(ctx, key, token, ttl)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return g, s.value(res), nil
}

// A WithRead Lock on a store that is Atomic and a QueueReader waits in the
// store's queue (no Acquire, no Apply while it waits) and gets the value
// the holder committed. The control: the same store without QueueReader
// (Atomic only) never queues: its WithRead waiter polls with Apply.
func TestWithReadWaitsInQueueReader(t *testing.T) {
	run := func(t *testing.T, s driver.Mutex, aq *atomicQueueStore) string {
		ctx := testCtx(t)
		aq.data["res"] = "v1"
		l1, err := newQueueClient(t, s).Lock(ctx, "k", dlock.WithRead("res"), dlock.WithWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *dlock.Lease, 1)
		go func() {
			l, err := newQueueClient(t, s).Lock(ctx, "k", dlock.WithRead("res"), dlock.WithWait(5*time.Second))
			if err != nil {
				t.Error(err)
			}
			done <- l
		}()
		if _, ok := s.(*readingQueueStore); ok {
			aq.awaitQueued(t, "k", 1)
		} else {
			// l1's grant, then the waiter's try
			waitFor(t, 5*time.Second, "the waiter's try", func() bool { return aq.applies.Load() >= 2 })
		}
		if err := l1.Commit(ctx, "v2"); err != nil {
			t.Fatal(err)
		}
		l2 := <-done
		if l2 == nil {
			t.FailNow()
		}
		v, found := l2.Value()
		if !l2.ValueRead() || !found {
			t.Fatalf("the waiter read nothing: %q %v %v", v, found, l2.ValueRead())
		}
		_ = l2.Release(ctx)
		return v
	}
	t.Run("QueueReader", func(t *testing.T) {
		s := &readingQueueStore{atomicQueueStore: &atomicQueueStore{queueStore: newQueueStore(), data: map[string]string{}}}
		if v := run(t, s, s.atomicQueueStore); v != "v2" {
			t.Fatalf("the queued waiter read %q, want the holder's commit v2", v)
		}
		if q, a, r := s.queueReads.Load(), s.acquires.Load(), s.atomicQueueStore.applies.Load(); q != 2 || a != 0 || r != 1 {
			t.Fatalf("%d AcquireQueuedRead, %d Acquire, %d Apply; want 2, 0 and 1 (the commit)", q, a, r)
		}
	})
	t.Run("control-AtomicOnly", func(t *testing.T) {
		s := &atomicQueueStore{queueStore: newQueueStore(), data: map[string]string{}}
		if v := run(t, s, s); v != "v2" {
			t.Fatalf("the polling waiter read %q, want v2", v)
		}
		if q := s.queued.Load(); q != 0 {
			t.Fatalf("without QueueReader a WithRead Lock queued %d times, want 0", q)
		}
	})
}
