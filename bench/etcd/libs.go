package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"example.com/dlock"
	"example.com/dlock/bench/internal/cmp"
	"example.com/dlock/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// sessionTTL is both libraries' session TTL (etcdstore's default).
const sessionTTL = 10 * time.Second

// locker is one library in one process.
type locker interface {
	// worker returns one goroutine's lock function, set up before the clock
	// starts (the peer's session is created here).
	worker(ctx context.Context) (cmp.LockFn, error)
	close()
}

var libNames = []string{"dlock", "concurrency"}

func newLocker(lib string, cli *clientv3.Client) (locker, error) {
	switch lib {
	case "dlock":
		st, err := etcdstore.New(cli, etcdstore.Options{Prefix: "bench/dlock/", SessionTTL: sessionTTL})
		if err != nil {
			return nil, err
		}
		dc, err := dlock.New(st)
		if err != nil {
			return nil, err
		}
		return &dlockLib{st: st, dc: dc}, nil
	case "concurrency":
		return &peerLib{cli: cli}, nil
	}
	return nil, fmt.Errorf("unknown library %q (known: dlock, concurrency)", lib)
}

// dlockLib is one dlock Client on one etcdstore.Store (one session) per
// process, shared by its goroutines, as the library is meant to be used.
type dlockLib struct {
	st *etcdstore.Store
	dc *dlock.Client
}

func (d *dlockLib) worker(context.Context) (cmp.LockFn, error) {
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		l, err := d.dc.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}, nil
}

func (d *dlockLib) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.dc.Close(ctx)
	_ = d.st.Close(ctx)
}

// peerLib is concurrency.Mutex with one Session per goroutine: Mutexes of
// one Session on one name share a key and do not exclude each other, so a
// session per goroutine is how its documentation's pattern holds for
// goroutines.
type peerLib struct {
	cli      *clientv3.Client
	mu       sync.Mutex
	sessions []*concurrency.Session
}

func (p *peerLib) worker(ctx context.Context) (cmp.LockFn, error) {
	sess, err := concurrency.NewSession(p.cli, concurrency.WithTTL(int(sessionTTL/time.Second)), concurrency.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.sessions = append(p.sessions, sess)
	p.mu.Unlock()
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		m := concurrency.NewMutex(sess, "bench/peer/"+key)
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		return m.Unlock, nil
	}, nil
}

func (p *peerLib) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sessions {
		_ = s.Close()
	}
}
