package dlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// hangExtend is a store whose Extend of the keys in hang waits until its
// context ends, as a call whose reply never comes. It has no Unwrap: the
// Client sees no BatchExtender and renews one Extend per lease.
type hangExtend struct {
	driver.Mutex
	hang map[string]bool
}

func (h hangExtend) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if h.hang[key] {
		<-ctx.Done()
		return driver.Grant{}, ctx.Err()
	}
	return h.Mutex.Extend(ctx, key, token, ttl)
}

// Leases due together are renewed in one batch; on a store without batched
// renewal, one hung Extend must not starve the others of the batch (they
// share its deadline). The hung leases are taken first, so they come first
// in every batch. Negative control: the hung leases themselves are lost.
func TestHungRenewalInABatchDoesNotStarveTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := hangExtend{Mutex: memstore.New(nil), hang: map[string]bool{"h1": true, "h2": true, "h3": true}}
		c := newClientOn(t, st)
		ctx := testCtx(t)
		const lease = 300 * time.Millisecond
		var hung []*dlock.Lease
		for _, k := range []string{"h1", "h2", "h3"} {
			hung = append(hung, mustLock(t, c, ctx, k, dlock.WithAutoRenew(lease)))
		}
		good := mustLock(t, c, ctx, "good", dlock.WithAutoRenew(lease))
		time.Sleep(3 * lease) // on the bubble's clock: three of the good lease's validities
		if err := good.Err(); err != nil {
			t.Fatalf("lease renewed in a batch with hung renewals: %v", err)
		}
		for _, l := range hung {
			if l.Err() == nil {
				t.Fatalf("control: a lease whose renewal hangs is still valid after %v", 3*lease)
			}
		}
		release(t, good)
	})
}
