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

// lostExtends applies every extension to the store and then withholds its
// reply until the call's context ends: a reply lost on the way back.
type lostExtends struct{ *memstore.Store }

func (s lostExtends) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	_, _ = s.Store.ExtendPermits(ctx, key, token, ttl)
	<-ctx.Done()
	return driver.PermitGrant{}, ctx.Err()
}

func (s lostExtends) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	_, _ = s.Store.Extend(ctx, key, token, ttl)
	<-ctx.Done()
	return driver.Grant{}, ctx.Err()
}

func (s lostExtends) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	_, _ = s.Store.ExtendRW(ctx, key, token, ttl)
	<-ctx.Done()
	return driver.RWGrant{}, ctx.Err()
}

// While an Extend shorter than the lease is out, its reply lost, the store
// has already applied it: once the shorter expiry has passed there, another
// holder gets in, and by then the holding no longer reports itself valid
// (Err set, Done closed, ValidUntil at most ttl after the call). Before the
// fix the validity stayed at the old, longer expiry until the reply's
// timeout: a permit and a read holding held while another holder was
// granted (found by TestSemaphoreTrafficZeroViolations and
// TestRWTrafficZeroViolations under lost replies), and a Lease the same. Control: the other
// holder does get in, so the store did apply the shorter expiry.
func TestExtendShorterReplyLostEndsValidityWithTheStore(t *testing.T) {
	const short = 50 * time.Millisecond
	check := func(t *testing.T, h interface {
		ValidUntil() time.Time
		Err() error
		Extend(context.Context, time.Duration) error
	}, other func() error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		go func() { _ = h.Extend(ctx, short) }()
		time.Sleep(short + time.Millisecond)
		synctest.Wait()
		if err := other(); err != nil {
			t.Fatalf("control: another holder after the shorter expiry: %v", err)
		}
		if h.Err() == nil || h.ValidUntil().Sub(start) > short {
			t.Fatalf("another holder is in, and the holding reports Err %v, valid %v after the Extend call", h.Err(), h.ValidUntil().Sub(start))
		}
	}
	t.Run("permit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := lostExtends{memstore.New(nil)}
			s := newSems(t, store, dlock.WithTTL(10*time.Second))
			p := mustAcquire(t, s, "sem", 1, 1)
			check(t, p, func() error { _, err := newSems(t, store).TryAcquire(context.Background(), "sem", 1, 1); return err })
		})
	})
	t.Run("lease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := lostExtends{memstore.New(nil)}
			holder, other := newClientOnStore(t, store, dlock.WithTTL(10*time.Second)), newClientOnStore(t, store)
			l, err := holder.TryLock(context.Background(), "k")
			if err != nil {
				t.Fatal(err)
			}
			check(t, l, func() error { _, err := other.TryLock(context.Background(), "k"); return err })
		})
	})
	t.Run("read-write", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := lostExtends{memstore.New(nil)}
			l, err := dlock.NewRWLocks(store, dlock.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			h, err := l.TryRLock(context.Background(), "rw")
			if err != nil {
				t.Fatal(err)
			}
			other, err := dlock.NewRWLocks(store)
			if err != nil {
				t.Fatal(err)
			}
			check(t, h, func() error { _, err := other.TryLock(context.Background(), "rw"); return err })
			_ = other.Close(context.Background())
			_ = l.Close(context.Background())
		})
	})
}

// newClientOnStore returns a Client of store, closed when the test ends.
func newClientOnStore(t *testing.T, store driver.Mutex, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}
