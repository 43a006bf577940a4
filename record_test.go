package dlock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// lostReply applies an Acquire and then reports no answer, once armed: the
// reply of an applied call lost on the way back.
type lostReply struct {
	driver.Mutex
	armed atomic.Bool
}

func (s *lostReply) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := s.Mutex.Acquire(ctx, key, token, ttl)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		return driver.Grant{}, errDown
	}
	return g, err
}

// An Owner's acquisition whose reply was lost and that Lock then retried
// leaves one hold more than the owner has leases (the store cannot tell the
// retry from a re-entry). Once the owner's holding is released, the Client
// gives that ghost hold back, so the key is free (it stayed held until its
// TTL before). Negative control: a store whose Release frees nothing keeps
// the key, so the check can fail.
func TestOwnersGhostHoldIsGivenBack(t *testing.T) {
	for _, broken := range []bool{false, true} {
		mem := memstore.New(nil)
		st := &lostReply{Mutex: mem}
		var store driver.Mutex = st
		if broken {
			store = noRelease{st}
		}
		c := newClientOn(t, store)
		st.armed.Store(true)
		ctx := dlock.ContextWithOwner(testCtx(t), dlock.NewOwner())
		l := mustLock(t, c, ctx, "k", dlock.WithTTL(time.Minute))
		if info, _ := mem.Inspect(ctx, "k"); info.Holds != 2 {
			t.Fatalf("broken=%v: the retried acquisition left %d holds, want 2 (the lost reply's and the lease's)", broken, info.Holds)
		}
		_ = l.Release(ctx)
		if err := c.Close(ctx); err != nil { // waits for the give-back
			t.Fatal(err)
		}
		info, err := mem.Inspect(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Held != broken {
			t.Fatalf("broken=%v: key held after the owner's last release = %v (%d holds, %v left)", broken, info.Held, info.Holds, info.Remaining)
		}
	}
}

// Two holdings of one owner extend at once, one far shorter than the
// other, many times over: the calls of one owner and key run one at a time
// and each asks for at least the other's lease, so the store's record
// never ends before the longer holding's validity. Seeded; the seed is
// printed on failure.
func TestConcurrentExtendsOfOneOwnerNeverShorten(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, seed))
	mem := memstore.New(nil)
	c := newClientOn(t, mem)
	ctx := dlock.ContextWithOwner(testCtx(t), dlock.NewOwner())
	long := mustLock(t, c, ctx, "k", dlock.WithTTL(time.Minute))
	short := mustLock(t, c, ctx, "k", dlock.WithTTL(time.Minute))
	for i := range 200 {
		shortTTL := time.Duration(1+rng.IntN(50)) * time.Millisecond
		longTTL := time.Minute + time.Duration(rng.IntN(1000))*time.Millisecond
		var wg sync.WaitGroup
		wg.Go(func() { _ = short.Extend(ctx, shortTTL) })
		wg.Go(func() { _ = long.Extend(ctx, longTTL) })
		wg.Wait()
		info, err := mem.Inspect(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if left := long.Remaining(); info.Remaining < left {
			t.Fatalf("seed %d, round %d: the store keeps the key %v, the longer holding is valid %v more", seed, i, info.Remaining, left)
		}
		if short.Err() != nil { // its own short validity ran out: take it again
			short = mustLock(t, c, ctx, "k", dlock.WithTTL(time.Minute))
		}
	}
	release(t, short)
	release(t, long)
}
