package zkstore_test

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkCuratorRWMix compares, on the shared server, Curator 5.4's
// InterProcessReadWriteLock (CuratorRWStress on a JVM: 16 threads of one
// client) with this store's read-write lock (16 goroutines of one Store,
// AcquireReadQueued / AcquireWriteQueued, ReleaseRW), on the mix of
// TestCuratorRWMixedNoOverlap: one key, a third of the holdings writes,
// each holding 0-3 ms. Each side runs alone; one iteration is 16 × 25
// holdings, timed from the start signal (the JVM started and warmed up
// before) to the last release. It reports holdings/s:
//
//	go test -run '^$' -bench CuratorRWMix -benchtime 3x ./zkstore
func BenchmarkCuratorRWMix(b *testing.B) {
	const threads, rounds = 16, 25
	java, cp := curatorProgram(b)
	addrs := strings.Join(server(b).Addrs(), ",")
	b.Run("curator", func(b *testing.B) {
		var busy time.Duration
		held := 0
		for i := range b.N {
			st := dial(b, uniq(b), sessionTimeout, server(b).Addrs()...)
			j := startJava(b, java, cp, "CuratorRWStress", addrs, st.RWRoot()+"/bench",
				strconv.Itoa(threads), strconv.Itoa(rounds), strconv.Itoa(i+1))
			start := time.Now()
			j.send(b, "GO")
			held += len(readIntervals(b, j))
			busy += time.Since(start)
		}
		b.ReportMetric(float64(held)/busy.Seconds(), "holdings/s")
	})
	b.Run("dlock", func(b *testing.B) {
		var busy time.Duration
		held := 0
		for i := range b.N {
			st := dial(b, uniq(b), sessionTimeout, server(b).Addrs()...)
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := time.Now()
			for g := range threads {
				wg.Go(func() {
					n := len(rwRounds(b, st, rand.New(rand.NewPCG(uint64(i+1), uint64(g))), rounds, true))
					mu.Lock()
					held += n
					mu.Unlock()
				})
			}
			wg.Wait()
			busy += time.Since(start)
		}
		b.ReportMetric(float64(held)/busy.Seconds(), "holdings/s")
	})
}
