package zkstore_test

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/zkstore"
)

// BenchmarkRWReadHeavy: 16 goroutines on 4 sessions take one key, 90 % of
// the time to read and else to write (AcquireReadQueued /
// AcquireWriteQueued, a section of 1 ms, ReleaseRW), against the mutex
// (AcquireQueued, the same section, Release) with the same goroutines:
// readers overlap, so the read-write lock should serve several times the
// mutex's sections per second.
//
//	go test -run XXX -bench RWReadHeavy ./zkstore
func BenchmarkRWReadHeavy(b *testing.B) {
	const sessions, work = 4, time.Millisecond
	e := server(b)
	root := uniq(b)
	st := make([]*zkstore.Store, sessions)
	for i := range st {
		st[i] = dial(b, root, 10*time.Second, e.Addrs()...)
	}
	ctx := ctxT(b, time.Hour)
	ops := map[string]func(s *zkstore.Store, rng *rand.Rand) error{
		"rwlock-90%read": func(s *zkstore.Store, rng *rand.Rand) error {
			t := tok()
			var err error
			if rng.IntN(10) == 0 {
				_, err = s.AcquireWriteQueued(ctx, "rw", t, time.Minute)
			} else {
				_, err = s.AcquireReadQueued(ctx, "rw", t, time.Minute)
			}
			if err != nil {
				return err
			}
			time.Sleep(work) // the section's work
			return s.ReleaseRW(ctx, "rw", t)
		},
		"mutex": func(s *zkstore.Store, _ *rand.Rand) error {
			t := tok()
			if _, err := s.AcquireQueued(ctx, "mu", t, time.Minute); err != nil {
				return err
			}
			time.Sleep(work)
			return s.Release(ctx, "mu", t)
		},
	}
	for _, name := range []string{"mutex", "rwlock-90%read"} {
		op := ops[name]
		b.Run(name, func(b *testing.B) {
			var next atomic.Int64
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(1)
				s, rng := st[int(i)%sessions], rand.New(rand.NewPCG(uint64(i), 1))
				for pb.Next() {
					if err := op(s, rng); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
