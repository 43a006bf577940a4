package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// TestOpenFairURL: fair=true opens a FairStore (waiter_lease= sets its
// waiter lease) that locks; waiter_lease= without fair=true is refused.
func TestOpenFairURL(t *testing.T) {
	srv, _ := newRedis(t)
	op := openURL(t, "redis://"+srv.Addr()+"?fair=true&waiter_lease=2s")
	f, ok := op.Store.(*redisstore.FairStore)
	if !ok || f.WaiterLease() != 2*time.Second || !strings.Contains(op.Describe, "fair") {
		t.Fatalf("fair=true opened %T (%q); want a FairStore with a 2s waiter lease", op.Store, op.Describe)
	}
	lockThrough(t, testCtx(t), op, "fair-url")
	if _, ok := openURL(t, "redis://"+srv.Addr()).Store.(*redisstore.Store); !ok {
		t.Error("a URL without fair=true did not open a *Store")
	}
	_, err := driver.Open(testCtx(t), "redis://"+srv.Addr()+"?waiter_lease=2s")
	if !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("waiter_lease without fair=true: %v, want ErrInvalid", err)
	}
}
