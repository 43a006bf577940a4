package zkstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// BenchmarkAcquireStrategy compares the two ways to try a lock: create our
// node first, then list (2 round trips when free; 3 with two writes when
// contended), and list first, skipping the create when the lock is held
// (1 read when contended; 3 round trips when free).
//
//	go test -run XXX -bench AcquireStrategy ./zkstore
func BenchmarkAcquireStrategy(b *testing.B) {
	e := server(b)
	for _, checkFirst := range []bool{false, true} {
		name := map[bool]string{false: "create-first", true: "check-first"}[checkFirst]
		s := dial(b, uniq(b), 10*time.Second, e.Addrs()...)
		zkstore.SetCreateFirst(s, !checkFirst)
		ctx := ctxT(b, time.Hour)
		b.Run(name+"/free", func(b *testing.B) {
			for b.Loop() {
				t := tok()
				if _, err := s.Acquire(ctx, "free", t, 0); err != nil {
					b.Fatal(err)
				}
				if err := s.Release(ctx, "free", t); err != nil {
					b.Fatal(err)
				}
			}
		})
		holder := dial(b, s.Root(), 10*time.Second, e.Addrs()...)
		if _, err := holder.Acquire(ctx, "held", tok(), 0); err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/contended", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Acquire(ctx, "held", tok(), 0); !errors.Is(err, driver.ErrNotAcquired) {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQueuedFree is an uncontended AcquireQueued + Release (the
// store's part of a Client's Lock on a free key): create, list + stat,
// delete. Run with -benchmem for the client's allocations per section.
//
//	go test -run XXX -bench QueuedFree -benchmem ./zkstore
func BenchmarkQueuedFree(b *testing.B) {
	e := server(b)
	s := dial(b, uniq(b), 10*time.Second, e.Addrs()...)
	ctx := ctxT(b, time.Hour)
	for b.Loop() {
		t := tok()
		if _, err := s.AcquireQueued(ctx, "free", t, 0); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, "free", t); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientLockFree is a dlock Client's Lock + Release on a free key
// through the store (what bench/zk's uncontended scenario runs): with
// -benchmem and -cpuprofile, the client's cost per section over the
// store's (BenchmarkQueuedFree).
//
//	go test -run XXX -bench ClientLockFree -benchmem ./zkstore
func BenchmarkClientLockFree(b *testing.B) {
	e := server(b)
	s := dial(b, uniq(b), 10*time.Second, e.Addrs()...)
	c, err := dlock.New(s)
	if err != nil {
		b.Fatal(err)
	}
	faulttest.CloseOnCleanup(b, c)
	ctx := ctxT(b, time.Hour)
	b.Cleanup(func() { _ = c.Close(ctx) })
	for b.Loop() {
		l, err := c.Lock(ctx, "free")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPeerLockFree is go-zookeeper's own Lock + Unlock on a free path
// (the bench's peer), for comparison with BenchmarkClientLockFree and
// BenchmarkQueuedFree on the same server in the same run.
//
//	go test -run XXX -bench 'LockFree|QueuedFree' -count 3 ./zkstore
func BenchmarkPeerLockFree(b *testing.B) {
	e := server(b)
	s := dial(b, uniq(b), 10*time.Second, e.Addrs()...)
	l := zk.NewLock(s.Conn(), s.Root()+"/peer", zk.WorldACL(zk.PermAll))
	for b.Loop() {
		if err := l.Lock(); err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
}
