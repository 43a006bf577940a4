package faulttest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/memstore"
)

// queueBatcher is memstore with a (non-waiting) queue and a batch extend.
type queueBatcher struct{ *memstore.Store }

func (q queueBatcher) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	return q.Acquire(ctx, key, token, ttl)
}

func (q queueBatcher) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return faulttest.ExtendEach(ctx, q.Extend, reqs)
}

// TestOverclaim: every grant and the model's session TTL are longer by
// More; errors pass through; the store's other capabilities stay visible.
func TestOverclaim(t *testing.T) {
	ctx := context.Background()
	const more = time.Hour
	o := faulttest.Overclaim{Store: queueBatcher{memstore.New(nil)}, More: more}
	if got := o.Model().SessionTTL; got != more {
		t.Fatalf("SessionTTL %v", got)
	}
	for _, c := range []struct {
		name string
		f    func() (driver.Grant, error)
	}{ // in order: the extends need the acquires
		{"Acquire", func() (driver.Grant, error) { return o.Acquire(ctx, "a", "t", time.Minute) }},
		{"AcquireQueued", func() (driver.Grant, error) { return o.AcquireQueued(ctx, "b", "t", time.Minute) }},
		{"Extend", func() (driver.Grant, error) { return o.Extend(ctx, "a", "t", time.Minute) }},
		{"ExtendBatch", func() (driver.Grant, error) {
			r := o.ExtendBatch(ctx, []driver.ExtendRequest{{Key: "b", Token: "t", TTL: time.Minute}})
			return r[0].Grant, r[0].Err
		}},
	} {
		if g, err := c.f(); err != nil || g.TTL != time.Minute+more {
			t.Errorf("%s: %+v, %v", c.name, g, err)
		}
	}
	if _, err := o.Extend(ctx, "a", "other", time.Minute); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Extend by another token: %v", err)
	}
	if _, ok := driver.As[driver.Inspector](o); !ok {
		t.Fatal("the store's Inspector is hidden")
	}
}
