package mysqlstore_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/mysqlstore"
)

// TestMeasureWait compares the two ways a waiter can wait on MariaDB (no
// NOTIFY): the lease table with the Client's backoff capped by the holder's
// remaining lease, and the session lock's blocking GET_LOCK (the server
// grants the name to a waiter on release). It measures the wake-up latency
// (release returned → the other process's Lock returned, 20 trials) and the
// throughput on one key with 2 clients × 25 goroutines for 3 s. It asserts
// only that every run made progress; the figures are the output. Run with
// DLOCK_MEASURE=1 (slow: about 20 s).
func TestMeasureWait(t *testing.T) {
	if os.Getenv("DLOCK_MEASURE") == "" {
		t.Skip("set DLOCK_MEASURE=1 to measure")
	}
	_, opts := migrated(t, mysqlstore.Options{})
	kinds := map[string]func(t *testing.T) driver.Mutex{
		"lease+backoff": func(t *testing.T) driver.Mutex {
			s, err := mysqlstore.New(openDB(t, shared(t).DSN()), opts)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"session+GET_LOCK": func(t *testing.T) driver.Mutex {
			s, err := mysqlstore.NewSession(openDB(t, shared(t).DSN()), mysqlstore.SessionOptions{Table: opts.Table, MaxConns: 40})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, name := range []string{"lease+backoff", "session+GET_LOCK"} {
		mk := kinds[name]
		t.Run(name, func(t *testing.T) {
			a, b := client(t, mk(t)), client(t, mk(t))
			lat := wakeups(t, a, b, 20)
			n := throughput(t, a, b, 25, 3*time.Second)
			t.Logf("%s: wake-up p50 %v p90 %v max %v; one key 2x25 for 3s: %d sections (%.0f/s)",
				name, lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1], n, float64(n)/3)
		})
	}
}

func client(t *testing.T, m driver.Mutex) *dlock.Client {
	c, err := dlock.New(m)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// wakeups: a holds the key, b waits in Lock; a releases; the latency is
// from a's Release returning to b's Lock returning. Sorted.
func wakeups(t *testing.T, a, b *dlock.Client, trials int) []time.Duration {
	var lat []time.Duration
	for i := range trials {
		key := "wake"
		la, err := a.Lock(ctxT(t), key)
		if err != nil {
			t.Fatal(err)
		}
		type res struct {
			at  time.Time
			err error
		}
		got := make(chan res, 1)
		go func() {
			lb, err := b.Lock(ctxT(t), key, dlock.WithWait(20*time.Second))
			if err != nil {
				got <- res{err: err}
				return
			}
			at := time.Now()
			got <- res{at, lb.Release(context.Background())}
		}()
		// Let b start waiting (and, with backoff, drift into a longer
		// pause): a realistic holder works for a while.
		time.Sleep(time.Duration(30+i*7%50) * time.Millisecond) // the workload under measurement, not synchronisation
		if err := la.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		lat = append(lat, r.at.Sub(released))
	}
	slices.Sort(lat)
	return lat
}

// throughput runs g goroutines on each client taking one key for d and
// returns the critical sections completed.
func throughput(t *testing.T, a, b *dlock.Client, g int, d time.Duration) int64 {
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range []*dlock.Client{a, b} {
		for range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					err := c.Do(ctx, "hot", func(context.Context) error { n.Add(1); return nil }, dlock.WithWait(d))
					if err != nil && ctx.Err() == nil {
						t.Errorf("Do: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if n.Load() == 0 {
		t.Error("no critical section completed")
	}
	return n.Load()
}
