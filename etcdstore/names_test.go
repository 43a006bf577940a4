package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
	"example.com/dlock/internal/faulttest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestKeyNamesReused: a busy lock name does not leave a new etcd key behind
// per holding (etcd's index keeps every key ever created until a compaction,
// and each acquisition ranges over the name's prefix). 30 cycles through the
// Client (AcquireQueued), 10 through Acquire, and 10 rounds of two Clients'
// waits on one store at once create at most two key names. Negative
// control: a store that names every key anew creates one per holding.
func TestKeyNamesReused(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		n := keyNamesAfterCycles(t, fresh)
		t.Logf("fresh names %v: %d distinct etcd keys created", fresh, n)
		switch {
		case !fresh && n > 2:
			t.Errorf("%d distinct etcd keys for one lock name; want at most 2 (reused)", n)
		case fresh && n < 50:
			t.Errorf("negative control: fresh names made only %d keys; the test cannot see the growth", n)
		}
	}
}

// keyNamesAfterCycles runs the cycles of TestKeyNamesReused on a new store
// and returns how many distinct etcd keys were created under the name.
func keyNamesAfterCycles(t *testing.T, fresh bool) int {
	t.Helper()
	prefix := uniq(t)
	s, cli := newStore(t, node(t), prefix, 0)
	etcdstore.SetFreshNames(s, fresh)
	ctx := ctxT(t, 60*time.Second)
	c1, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c1)
	c2, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c2)
	start, err := cli.Get(ctx, "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		l, err := c1.Lock(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
	}
	for range 10 {
		a := tok()
		if _, err := s.Acquire(ctx, "busy", a, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, "busy", a); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 { // two Clients of one store: a holder and a waiter in etcd's queue at once
		l1, err := c1.Lock(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l2, err := c2.Lock(ctx, "busy")
			if err == nil {
				err = l2.Release(ctx)
			}
			got <- err
		}()
		waitQueued(t, ctx, s, "busy")
		_ = l1.Release(ctx)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	return createdKeys(t, ctx, cli, prefix+"busy/", start.Header.Revision)
}

// waitQueued returns once key has a waiter in etcd's queue.
func waitQueued(t *testing.T, ctx context.Context, s *etcdstore.Store, key string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if n, err := s.Waiters(ctx, key); err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the second Client never queued")
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(2 * time.Millisecond): // polling the server; bounded by the deadline
		}
	}
}

// createdKeys counts the distinct keys put under pfx after revision from,
// read from etcd's history with a watch (the keys are deleted by now).
func createdKeys(t *testing.T, ctx context.Context, cli *clientv3.Client, pfx string, from int64) int {
	t.Helper()
	now, err := cli.Get(ctx, "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	keys := map[string]bool{}
	for wr := range cli.Watch(wctx, pfx, clientv3.WithPrefix(), clientv3.WithRev(from+1)) {
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			if ev.IsCreate() {
				keys[string(ev.Kv.Key)] = true
			}
		}
		if wr.Header.Revision >= now.Header.Revision {
			break
		}
	}
	return len(keys)
}

// TestPermitKeyNamesReused: a busy semaphore does not leave a new etcd key
// behind per holding either: 30 cycles of one holding and 10 rounds of two
// holdings at once create at most two key names. (A holding released
// through another Store, which reads it first, as the last one here is,
// leaves its name reserved in the Store that took it until its session
// ends.) Negative control: a store that names every key anew creates one
// per holding.
func TestPermitKeyNamesReused(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		prefix := uniq(t)
		s, cli := newStore(t, node(t), prefix, 0)
		other, _ := newStore(t, node(t), prefix, 0)
		etcdstore.SetFreshNames(s, fresh)
		ctx := ctxT(t, 60*time.Second)
		start, err := cli.Get(ctx, "revision-probe")
		if err != nil {
			t.Fatal(err)
		}
		take := func(tk string) {
			if _, err := s.AcquirePermits(ctx, "busy", tk, 2, 1, time.Second); err != nil {
				t.Fatal(err)
			}
		}
		for range 30 {
			a := tok()
			take(a)
			if err := s.ReleasePermits(ctx, "busy", a); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			a, b := tok(), tok()
			take(a)
			take(b)
			for _, tk := range []string{b, a} {
				if err := s.ReleasePermits(ctx, "busy", tk); err != nil {
					t.Fatal(err)
				}
			}
		}
		last := tok()
		take(last)
		if err := other.ReleasePermits(ctx, "busy", last); err != nil {
			t.Fatalf("ReleasePermits through another Store: %v", err)
		}
		sem, _ := etcdstore.FamilyPrefixes(prefix, "busy")
		n := createdKeys(t, ctx, cli, sem, start.Header.Revision)
		t.Logf("fresh names %v: %d distinct etcd keys created", fresh, n)
		switch {
		case !fresh && n > 2:
			t.Errorf("%d distinct etcd keys for one semaphore; want at most 2 (reused)", n)
		case fresh && n < 50:
			t.Errorf("negative control: fresh names made only %d keys; the test cannot see the growth", n)
		}
	}
}
