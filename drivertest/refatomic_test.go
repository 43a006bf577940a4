package drivertest_test

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// refAtomic is a refStore with driver.Atomic and driver.QueueReader over a
// map of resources guarded by the refStore's mutex, so that the Atomic and
// QueueReader cases run against something that passes them, and fail on
// its queueReadEarly mutant.
type refAtomic struct {
	*refStore
	data map[string]string // guarded by refStore.mu
}

// queueReadEarly reads a queued waiter's resource when it queues, not when
// it gets the key: the waiter misses what the holder committed meanwhile.
const queueReadEarly mutation = "queue-read-early"

var (
	_ driver.Atomic      = (*refAtomic)(nil)
	_ driver.QueueReader = (*refAtomic)(nil)
)

func newRefAtomic(m mutation) *refAtomic {
	return &refAtomic{refStore: newRef(m), data: map[string]string{}}
}

// value reads res. Called with r.mu held.
func (r *refAtomic) value(res string) driver.Value {
	if res == "" {
		return driver.Value{}
	}
	d, ok := r.data[res]
	return driver.Value{Data: d, Found: ok}
}

// Apply implements driver.Atomic under the refStore's mutex: the lock part
// first; on its error nothing is read or written.
func (r *refAtomic) Apply(ctx context.Context, st driver.Step) (driver.Grant, driver.Value, error) {
	if err := r.reach(ctx); err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var g driver.Grant
	var err error
	switch st.Action {
	case driver.Acquire:
		if st.Write != nil {
			return driver.Grant{}, driver.Value{}, fmt.Errorf("%w: write with acquire", driver.ErrInvalid)
		}
		g, err = r.acquire(st.Key, st.Token, st.TTL)
	case driver.Transfer:
		g, err = r.transfer(st.Key, st.Token, st.To, st.TTL)
	case driver.Release:
		err = r.release(st.Key, st.Token)
	default:
		err = fmt.Errorf("%w: action %d", driver.ErrInvalid, st.Action)
	}
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	if st.Write != nil {
		r.data[st.Write.Resource] = st.Write.Value
	}
	return g, r.value(st.Read), nil
}

// transfer gives from's single hold of key to to. Called with r.mu held.
func (r *refAtomic) transfer(key, from, to string, ttl time.Duration) (driver.Grant, error) {
	l, err := r.owned(key, from)
	if err != nil {
		return driver.Grant{}, err
	}
	if l.holds > 1 {
		return driver.Grant{}, fmt.Errorf("%w: re-entered", driver.ErrInvalid)
	}
	r.fence++
	l.token, l.fence, l.expires = to, r.fence, time.Now().Add(ttl)
	return driver.Grant{Fence: l.fence, Holds: 1, TTL: ttl}, nil
}

// release drops one hold of token on key. Called with r.mu held.
func (r *refAtomic) release(key, token string) error {
	l, err := r.owned(key, token)
	if err != nil {
		return err
	}
	if l.holds--; l.holds == 0 {
		delete(r.locks, key)
		r.notify(key)
	}
	return nil
}

// AcquireQueuedRead implements driver.QueueReader: AcquireQueued, then the
// read. Between the two only token, now the holder, could write res
// through Apply, so the value is the one at the grant.
func (r *refAtomic) AcquireQueuedRead(ctx context.Context, key, token string, ttl time.Duration, res string) (driver.Grant, driver.Value, error) {
	r.mu.Lock()
	early := r.value(res)
	r.mu.Unlock()
	g, err := r.AcquireQueued(ctx, key, token, ttl)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	if r.mut == queueReadEarly {
		return g, early, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return g, r.value(res), nil
}
