package zkstore_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
)

// BenchmarkCuratorSemaphoreMix compares, on the shared server, Curator
// 5.4's InterProcessSemaphoreV2 (CuratorSemStress on a JVM: threads of one
// client) with this store's semaphore through dlock.Semaphores (goroutines
// of one Store, Acquire waiting by notification, Release), each holding
// one permit for 0-3 ms: "alone" is 1 thread (uncontended cycles: round
// trips and their latency), "16of4" 16 threads sharing 4 permits. Each
// side runs alone; one iteration is threads × 25 holdings, timed from the
// start signal (the JVM started and warmed up before) to the last return.
// It reports holdings/s and fails if more than the limit were inside at
// once. Run with the read-write lock's comparison in one go:
//
//	go test -run '^$' -bench 'Curator(RW|Semaphore)Mix' -benchtime 1x -count 3 ./zkstore
func BenchmarkCuratorSemaphoreMix(b *testing.B) {
	const rounds = 25
	java, cp := curatorProgram(b)
	addrs := strings.Join(server(b).Addrs(), ",")
	for _, c := range []struct {
		name           string
		threads, limit int
	}{{"alone", 1, 4}, {"16of4", 16, 4}} {
		b.Run(c.name+"/curator", func(b *testing.B) {
			var busy time.Duration
			var all []interval
			for i := range b.N {
				st := dial(b, uniq(b), sessionTimeout, server(b).Addrs()...)
				j := startJava(b, java, cp, "CuratorSemStress", addrs, st.SemRoot()+"/bench",
					strconv.Itoa(c.threads), strconv.Itoa(rounds), strconv.Itoa(c.limit), strconv.Itoa(i+1))
				start := time.Now()
				j.send(b, "GO")
				all = append(all, readIntervals(b, j)...)
				busy += time.Since(start)
			}
			reportPermits(b, all, c.limit, busy)
		})
		b.Run(c.name+"/dlock", func(b *testing.B) {
			var busy time.Duration
			var all []interval
			for i := range b.N {
				st := dial(b, uniq(b), sessionTimeout, server(b).Addrs()...)
				sems, err := dlock.NewSemaphores(st)
				if err != nil {
					b.Fatal(err)
				}
				var mu sync.Mutex
				var wg sync.WaitGroup
				start := time.Now()
				for g := range c.threads {
					wg.Go(func() {
						iv := permitRounds(b, sems, rand.New(rand.NewPCG(uint64(i+1), uint64(g))), rounds, c.limit)
						mu.Lock()
						all = append(all, iv...)
						mu.Unlock()
					})
				}
				wg.Wait()
				busy += time.Since(start)
				_ = sems.Close(ctxT(b, 10*time.Second))
			}
			reportPermits(b, all, c.limit, busy)
		})
	}
}

// permitRounds takes one of limit permits of "bench" rounds times, holding
// each 0-3 ms, and returns the holdings' intervals.
func permitRounds(t testing.TB, sems *dlock.Semaphores, rng *rand.Rand, rounds, limit int) []interval {
	ctx := ctxT(t, time.Minute)
	var out []interval
	for range rounds {
		p, err := sems.Acquire(ctx, "bench", limit, 1)
		if err != nil {
			t.Error(err)
			return out
		}
		in := interval{enter: time.Now().UnixMicro()}
		time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond) // the section's work
		in.exit = time.Now().UnixMicro()
		if err := p.Release(ctx); err != nil {
			t.Error(err)
			return out
		}
		out = append(out, in)
	}
	return out
}

// reportPermits reports holdings/s and fails b if more than limit of iv
// were inside at once.
func reportPermits(b *testing.B, iv []interval, limit int, busy time.Duration) {
	if most := mostInside(iv); most > limit {
		b.Fatalf("%d holdings inside at once, limit %d", most, limit)
	}
	b.ReportMetric(float64(len(iv))/busy.Seconds(), "holdings/s")
}

// mostInside returns the most intervals of iv that were open at one
// instant (an exit at the instant of an enter counts as before it).
func mostInside(iv []interval) int {
	type edge struct {
		at    int64
		delta int
	}
	var es []edge
	for _, in := range iv {
		es = append(es, edge{in.enter, 1}, edge{in.exit, -1})
	}
	slices.SortFunc(es, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	most, cur := 0, 0
	for _, e := range es {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}
