package main

import (
	"context"
	"errors"
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

// readLocker is a library that reads the stock with the grant and writes it
// with the release, in the lock's own etcd transactions (dlock's WithRead
// and Lease.Commit); the seed scenario uses it when the library is one.
type readLocker interface {
	lockRead(ctx context.Context, key, resource string) (*dlock.Lease, error)
}

// libNames are the libraries run by default, in report order; the ratios
// are each library's to "concurrency", which must be run.
var libNames = []string{"dlock", "concurrency"}

// extraLibs can be named in -libs but are not run by default. dlock-noread
// is dlock without WithRead and Commit: its seed requests read and write
// the stock with their own Get and Put, as the peer's do (dlock's seed
// before etcdstore was a driver.Atomic).
var extraLibs = []string{"dlock-noread"}

func newLocker(lib string, cli *clientv3.Client) (locker, error) {
	switch lib {
	case "dlock", "dlock-noread":
		st, err := etcdstore.New(cli, etcdstore.Options{Prefix: "bench/dlock/", SessionTTL: sessionTTL})
		if err != nil {
			return nil, err
		}
		dc, err := dlock.New(st)
		if err != nil {
			return nil, err
		}
		if lib == "dlock-noread" {
			return dlockNoRead{&dlockLib{st: st, dc: dc}}, nil
		}
		return &dlockLib{st: st, dc: dc}, nil
	case "concurrency":
		return &peerLib{cli: cli}, nil
	}
	return nil, fmt.Errorf("unknown library %q (known: dlock, concurrency, dlock-noread)", lib)
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

// lockRead takes the lock with dlock.WithRead(resource): the value comes
// back with the grant (the acquiring transaction, the one that finds the
// waiter at the head of etcd's queue, or the local handoff), and
// Lease.Commit writes it in the releasing (or handing-off) transaction.
func (d *dlockLib) lockRead(ctx context.Context, key, resource string) (*dlock.Lease, error) {
	l, err := d.dc.Lock(ctx, key, dlock.WithRead(resource))
	if err != nil {
		return nil, err
	}
	if !l.ValueRead() {
		_ = l.Release(ctx)
		return nil, errors.New("dlock: WithRead did not read")
	}
	return l, nil
}

func (d *dlockLib) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.dc.Close(ctx)
	_ = d.st.Close(ctx)
}

// dlockNoRead is dlock without WithRead (a named field, not an embedding,
// so that it is no readLocker).
type dlockNoRead struct{ d *dlockLib }

func (n dlockNoRead) worker(ctx context.Context) (cmp.LockFn, error) { return n.d.worker(ctx) }

func (n dlockNoRead) close() { n.d.close() }

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
