package zkstore_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock/zkstore"
)

// interval is one holding seen by a side: its mode and its time inside, in
// µs on the wall clock (the JVM and the test share the machine's).
type interval struct {
	write       bool
	enter, exit int64
	jvm         bool
}

// overlaps counts the pairs of intervals in which a writer is inside with
// anyone (one of them from the JVM, one from dlock: cross counts those).
func overlaps(iv []interval) (all, cross int) {
	for i := range iv {
		for j := i + 1; j < len(iv); j++ {
			a, b := iv[i], iv[j]
			if (a.write || b.write) && a.enter < b.exit && b.enter < a.exit {
				all++
				if a.jvm != b.jvm {
					cross++
				}
			}
		}
	}
	return all, cross
}

// interleaved returns a counter of the intervals that began within the
// span of iv (first enter to last exit).
func interleaved(iv []interval) func([]interval) int {
	lo, hi := iv[0].enter, iv[0].exit
	for _, in := range iv {
		lo, hi = min(lo, in.enter), max(hi, in.exit)
	}
	return func(other []interval) (n int) {
		for _, in := range other {
			if in.enter >= lo && in.enter <= hi {
				n++
			}
		}
		return n
	}
}

// TestCuratorRWMixedNoOverlap: 4 threads of a Curator 5.4 client (on a
// real JVM) and 6 goroutines on 2 dlock Stores take one read-write lock
// at once, a third of the time to write (dlock through AcquireReadQueued
// and AcquireWriteQueued), holding it 0-3 ms. Every holding's interval is
// recorded on the shared wall clock; a writer inside with anyone is an
// overlap, and there must be none. Control: the dlock side records its
// intervals without taking the lock, and overlaps with the JVM's writers
// must be found.
func TestCuratorRWMixedNoOverlap(t *testing.T) {
	java, cp := curatorProgram(t)
	for _, locked := range []bool{true, false} {
		t.Run(fmt.Sprintf("locked=%v", locked), func(t *testing.T) {
			const threads, goroutines, rounds = 4, 3, 25
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			root := uniq(t)
			st := []*zkstore.Store{dial(t, root, sessionTimeout, server(t).Addrs()...), dial(t, root, sessionTimeout, server(t).Addrs()...)}
			j := startJava(t, java, cp, "CuratorRWStress", strings.Join(server(t).Addrs(), ","), st[0].RWRoot()+"/mixed",
				strconv.Itoa(threads), strconv.Itoa(rounds), strconv.FormatUint(seed, 10))
			j.send(t, "GO")
			var mu sync.Mutex
			var iv []interval
			var wg sync.WaitGroup
			for g := range 2 * goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mine := rwRounds(t, st[g%2], rand.New(rand.NewPCG(seed, uint64(g))), rounds, locked)
					mu.Lock()
					iv = append(iv, mine...)
					mu.Unlock()
				}()
			}
			jvm := readIntervals(t, j)
			wg.Wait()
			mixed := interleaved(iv)
			iv = append(iv, jvm...)
			all, cross := overlaps(iv)
			t.Logf("%d holdings (%d from the JVM, %d of them while dlock's ran): %d overlaps, %d between the JVM and dlock (seed %d)", len(iv), len(jvm), mixed(jvm), all, cross, seed)
			if mixed(jvm) == 0 {
				t.Fatalf("the JVM's holdings all fell outside dlock's: the two sides did not contend (seed %d)", seed)
			}
			if locked && all > 0 {
				t.Fatalf("%d overlaps (%d between the JVM and dlock) with the lock taken on both sides (seed %d)", all, cross, seed)
			}
			if !locked && cross == 0 {
				t.Fatalf("control: dlock without the lock showed no overlap with the JVM's writers (seed %d)", seed)
			}
		})
	}
}

// rwRounds takes the lock rounds times (or, unlocked, only records).
func rwRounds(t testing.TB, s *zkstore.Store, rng *rand.Rand, rounds int, locked bool) []interval {
	ctx := ctxT(t, time.Minute)
	var out []interval
	for range rounds {
		write, tk := rng.IntN(3) == 0, tok()
		if locked {
			var err error
			if write {
				_, err = s.AcquireWriteQueued(ctx, "mixed", tk, time.Minute)
			} else {
				_, err = s.AcquireReadQueued(ctx, "mixed", tk, time.Minute)
			}
			if err != nil {
				t.Error(err)
				return out
			}
		}
		in := interval{write: write, enter: time.Now().UnixMicro()}
		work := time.Duration(rng.IntN(4)) * time.Millisecond
		if !locked {
			work += 3 * time.Millisecond // unlocked rounds take no turns: stretch them over the JVM's
		}
		time.Sleep(work) // the section's work
		in.exit = time.Now().UnixMicro()
		if locked {
			if err := s.ReleaseRW(ctx, "mixed", tk); err != nil {
				t.Error(err)
				return out
			}
		}
		out = append(out, in)
	}
	return out
}

// readIntervals reads CuratorRWStress's holdings until DONE.
func readIntervals(t testing.TB, j *jvmRW) []interval {
	var out []interval
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-j.lines:
			if !ok {
				t.Fatal("CuratorRWStress exited before DONE")
			}
			if l == "DONE" {
				return out
			}
			var mode string
			var in interval
			if _, err := fmt.Sscanf(l, "H %s %d %d", &mode, &in.enter, &in.exit); err != nil {
				t.Fatalf("CuratorRWStress: %q", l)
			}
			in.write, in.jvm = mode == "w", true
			out = append(out, in)
		case <-timeout:
			t.Fatal("CuratorRWStress did not finish within 2 minutes")
		}
	}
}
