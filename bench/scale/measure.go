package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"example.com/dlock"
	"example.com/dlock/bench/internal/cmp"
	"example.com/dlock/driver"
	_ "example.com/dlock/etcdstore"
	_ "example.com/dlock/mysqlstore"
	_ "example.com/dlock/pgstore"
	_ "example.com/dlock/redisstore"
	_ "example.com/dlock/zkstore"
)

// openStore opens url's store (driver.Open) as a mutex store.
func openStore(ctx context.Context, url string) (driver.Mutex, func(), error) {
	o, err := driver.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	m, ok := o.Store.(driver.Mutex)
	if !ok {
		_ = o.Close()
		return nil, nil, fmt.Errorf("%s is no mutex store", o.Describe)
	}
	return m, func() { _ = o.Close() }, nil
}

// leaseRow is one Client holding N leases under automatic renewal.
type leaseRow struct {
	N           int
	Acquire     time.Duration // to take the N leases, 64 at a time
	PerInterval float64       // the store's requests per renewal interval while held
	// TripsPerInterval is the round trips per renewal interval where the
	// server tells them apart from requests (server.trips), else 0.
	TripsPerInterval float64
	CPUPerInterva    time.Duration // this process's CPU per renewal interval while held
	BytesPerLease    float64       // Go heap held per lease (after GC)
	Lost             int           // leases whose Err was set by the end
}

// measureLeases takes n leases of length lease with one Client, then
// counts the store's requests and this process's CPU over intervals
// renewal intervals (lease/3 each) and the heap the leases hold.
func measureLeases(ctx context.Context, srv *server, n int, lease time.Duration, intervals int) (leaseRow, error) {
	m, closeStore, err := openStore(ctx, srv.url)
	if err != nil {
		return leaseRow{}, err
	}
	defer closeStore()
	c, err := dlock.New(m, dlock.WithAutoRenew(lease))
	if err != nil {
		return leaseRow{}, err
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	leases := make([]*dlock.Lease, n)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	if err := forEach(n, 64, func(i int) (err error) {
		leases[i], err = c.Lock(ctx, "scale-"+strconv.Itoa(i))
		return err
	}); err != nil {
		return leaseRow{}, fmt.Errorf("acquire: %w", err)
	}
	row := leaseRow{N: n, Acquire: time.Since(t0)}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	row.BytesPerLease = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
	if err := srv.window(ctx, &row, time.Duration(intervals)*lease/3, lease/3); err != nil {
		return row, err
	}
	for _, l := range leases {
		if l.Err() != nil {
			row.Lost++
		}
	}
	err = forEach(n, 64, func(i int) error {
		if err := leases[i].Release(ctx); err != nil && leases[i].Err() == nil {
			return err
		}
		return nil // a lost lease's release fails: it is counted in Lost
	})
	return row, err
}

// window measures the store's requests and round trips and this
// process's CPU over d (while the Client renews on its own) into row, per
// interval.
func (s *server) window(ctx context.Context, row *leaseRow, d, interval time.Duration) error {
	c0, err := s.count(ctx)
	if err != nil {
		return err
	}
	r0, err := s.readTrips(ctx)
	if err != nil {
		return err
	}
	cpu0, w0 := cmp.CPUTime(), time.Now()
	time.Sleep(d)
	cpu1, w1 := cmp.CPUTime(), time.Now()
	c1, err := s.count(ctx)
	if err != nil {
		return err
	}
	r1, err := s.readTrips(ctx)
	if err != nil {
		return err
	}
	per := float64(w1.Sub(w0)) / float64(interval)
	row.PerInterval = float64(c1-c0-s.self) / per
	if s.trips != nil {
		row.TripsPerInterval = float64(r1-r0-2) / per // less the two reads of the INFOs after r0's
	}
	row.CPUPerInterva = time.Duration(float64(cpu1-cpu0) / per)
	return nil
}

// readTrips is s.trips, or 0 without it.
func (s *server) readTrips(ctx context.Context) (int64, error) {
	if s.trips == nil {
		return 0, nil
	}
	return s.trips(ctx)
}

// forEach runs f(i) for i in [0, n), at most par at a time, and returns
// the first error.
func forEach(n, par int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				mu.Lock()
				first = errors.Join(first, err)
				mu.Unlock()
			}
		})
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop {
			break
		}
	}
	wg.Wait()
	return first
}

// waitRow is N waiters, each a Client of its own on one store, on one key.
type waitRow struct {
	N          int
	Done       int     // waiters granted before the limit
	PerRelease float64 // the store's requests per handover
	Gap        cmp.Quantiles
	Total      time.Duration
}

// measureWaiters holds a key with one Client, queues n Clients' waiters
// on it (settle: time for them to queue), then releases; each waiter
// releases as soon as it is granted. It counts the store's requests from
// the first release to the last grant, and the time between one grant and
// the next (the first from the release).
func measureWaiters(ctx context.Context, srv *server, n int, settle, limit time.Duration) (waitRow, error) {
	m, closeStore, err := openStore(ctx, srv.url)
	if err != nil {
		return waitRow{}, err
	}
	defer closeStore()
	const key = "scale-herd"
	holder, err := dlock.New(m)
	if err != nil {
		return waitRow{}, err
	}
	l, err := holder.Lock(ctx, key)
	if err != nil {
		return waitRow{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, settle+limit+pgLag)
	defer cancel()
	grants := make(chan time.Time, n)
	var wg sync.WaitGroup
	for range n {
		w, err := dlock.New(m)
		if err != nil {
			return waitRow{}, err
		}
		wg.Go(func() {
			lw, err := w.Lock(wctx, key)
			if err != nil {
				return
			}
			grants <- time.Now()
			_ = lw.Release(context.WithoutCancel(wctx))
		})
	}
	time.Sleep(settle) // the waiters queue; nothing to synchronise with in the store's terms
	c0, err := srv.count(ctx)
	if err != nil {
		return waitRow{}, err
	}
	t0 := time.Now()
	if err := l.Release(ctx); err != nil {
		return waitRow{}, err
	}
	times := collect(t0, grants, n, limit)
	row := waitRow{N: n, Done: len(times) - 1, Total: time.Since(t0)}
	cancel()
	wg.Wait()
	c1, err := srv.count(ctx)
	if err != nil {
		return row, err
	}
	row.PerRelease = float64(c1-c0-srv.self) / float64(max(row.Done, 1))
	var gaps []int64
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, int64(times[i].Sub(times[i-1])))
	}
	row.Gap = cmp.QuantilesOf(gaps)
	return row, nil
}

// collect returns t0 and the first n grant times from grants, in order,
// or those that came within limit.
func collect(t0 time.Time, grants <-chan time.Time, n int, limit time.Duration) []time.Time {
	times := []time.Time{t0}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for len(times) <= n {
		select {
		case g := <-grants:
			times = append(times, g)
		case <-timer.C:
			n = 0
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	return times
}
