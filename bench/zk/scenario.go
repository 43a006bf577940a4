package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"example.com/dlock/bench/internal/cmp"
	"github.com/go-zookeeper/zk"
)

// row is one scenario run with one library.
type row struct {
	sc       scenario
	lib      string
	res      *result
	packets  int64 // requests the server received during the run
	cs       int64 // critical sections, if not res.Ops (wakeup: 2 per wake-up)
	final    int   // seed: stock left
	oversold bool
}

// runScenario runs sc with lib and counts the server's packets from the
// moment every process is ready (connected, warmed up) to its end.
func runScenario(srv *server, sc scenario, lib string, cfg config) (row, error) {
	if sc.Wake {
		return runWake(srv, sc, lib, cfg.wakes)
	}
	dir, err := os.MkdirTemp("", "dlockbench-zk-marker-")
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(dir)
	j := job{Job: cmp.Job{Lib: lib, Goroutines: sc.Goroutines, Duration: cfg.dur, Dir: dir}, Addr: srv.Addr}
	if sc.Seed {
		j.Duration = 0
		if err := setStock(srv.Addr, 100); err != nil {
			return row{}, err
		}
	}
	var p0 int64
	var perr error
	ready := func() { p0, perr = srv.packets() }
	var res *result
	if sc.Procs == 1 {
		res, err = runProcess(j, ready, cmp.Open)
	} else {
		res, err = runProcs(j, sc.Procs, ready)
	}
	if err != nil {
		return row{}, err
	}
	p1, err := srv.packets()
	if err = errors.Join(perr, err); err != nil {
		return row{}, err
	}
	r := row{sc: sc, lib: lib, res: res, packets: p1 - p0}
	if sc.Seed {
		if r.final, err = getStock(srv.Addr); err != nil {
			return row{}, err
		}
		r.oversold = r.final < 0 || int64(100-r.final) != res.Successes
	}
	return r, nil
}

// setStock creates or overwrites the seed scenario's stock znode.
func setStock(addr string, n int) error {
	conn, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, p := range []string{"/bench", stockKey} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	_, err = conn.Set(stockKey, []byte(strconv.Itoa(n)), -1)
	return err
}

func getStock(addr string) (int, error) {
	conn, err := dial(addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	b, _, err := conn.Get(stockKey)
	if err != nil {
		return 0, fmt.Errorf("read stock: %w", err)
	}
	return strconv.Atoi(string(b))
}

// runWake measures the next waiter's wake-up: a holder and a waiter, each
// on its own connection (its own session, as two processes would be), the
// waiter queued behind the holder (its node is in the lock path); the
// latency is from the holder's unlock call to the waiter's grant. n
// wake-ups.
func runWake(srv *server, sc scenario, lib string, n int) (row, error) {
	var conns [2]*zk.Conn
	var fns [2]cmp.LockFn
	for i := range conns {
		c, err := dial(srv.Addr)
		if err != nil {
			return row{}, err
		}
		defer c.Close()
		lk, err := newLocker(lib, c)
		if err != nil {
			return row{}, err
		}
		defer lk.close()
		if fns[i], err = lk.worker(); err != nil {
			return row{}, err
		}
		conns[i] = c
	}
	path := map[string]string{"dlock": dlockRoot, "zk.Lock": peerRoot}[lib] + "/wake"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p0, err := srv.packets()
	if err != nil {
		return row{}, err
	}
	res := &result{}
	t0 := time.Now()
	for range n {
		lat, polls, err := wakeOnce(ctx, conns[0], path, fns[0], fns[1])
		if err != nil {
			return row{}, err
		}
		res.Ops++
		res.DataOps += polls // the observer's reads are not the lock's
		res.Lat = append(res.Lat, int64(lat))
	}
	res.Wall = time.Since(t0)
	res.PerWorker = []int64{res.Ops}
	p1, err := srv.packets()
	if err != nil {
		return row{}, err
	}
	return row{sc: sc, lib: lib, res: res, packets: p1 - p0, cs: 2 * res.Ops}, nil
}

// wakeOnce: holder locks, the waiter queues (seen as a second node in
// path), holder unlocks; it returns the time from the unlock call to the
// waiter's grant, and how many reads the observer made.
func wakeOnce(ctx context.Context, observer *zk.Conn, path string, holder, waiter cmp.LockFn) (lat time.Duration, polls int64, err error) {
	unlock, err := holder(ctx, "wake")
	if err != nil {
		return 0, 0, err
	}
	type grant struct {
		at     time.Time
		unlock func(context.Context) error
		err    error
	}
	got := make(chan grant, 1)
	go func() {
		u, err := waiter(ctx, "wake")
		got <- grant{time.Now(), u, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		polls++
		kids, _, err := observer.Children(path)
		if err == nil && len(kids) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			return 0, polls, fmt.Errorf("the waiter did not queue in 10 s (%v)", err)
		}
		time.Sleep(time.Millisecond) // polling before the measured interval
	}
	t0 := time.Now()
	if err := unlock(ctx); err != nil {
		return 0, polls, err
	}
	g := <-got
	if g.err != nil {
		return 0, polls, g.err
	}
	if err := g.unlock(ctx); err != nil {
		return 0, polls, err
	}
	return g.at.Sub(t0), polls, nil
}
