package main

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock"
	"example.com/dlock/bench/internal/cmp"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// locker is one library in one process, on the process's connection.
type locker interface {
	// worker returns one goroutine's lock function, set up before the clock
	// starts.
	worker() (cmp.LockFn, error)
	close()
}

var libNames = []string{"dlock", "zk.Lock"}

// Lock paths: each library its own, so that neither sees the other's nodes.
const (
	dlockRoot = "/bench/dlock"
	peerRoot  = "/bench/peer"
)

func newLocker(lib string, conn *zk.Conn) (locker, error) {
	switch lib {
	case "dlock":
		st, err := zkstore.New(conn, zkstore.Options{Root: dlockRoot, SessionTimeout: sessionTimeout})
		if err != nil {
			return nil, err
		}
		dc, err := dlock.New(st)
		if err != nil {
			return nil, err
		}
		return &dlockLib{st: st, dc: dc}, nil
	case "zk.Lock":
		return &peerLib{conn: conn}, nil
	}
	return nil, fmt.Errorf("unknown library %q (known: dlock, zk.Lock)", lib)
}

// dlockLib is one dlock Client on one zkstore.Store (the connection's
// session) per process, shared by its goroutines, as the library is meant
// to be used.
type dlockLib struct {
	st *zkstore.Store
	dc *dlock.Client
}

func (d *dlockLib) worker() (cmp.LockFn, error) {
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
	_ = d.st.Close() // the conn is the process's: the store leaves it open
}

// peerLib is go-zookeeper's Lock: one *zk.Lock per goroutine (a Lock is one
// holding: locking it twice is ErrDeadlock), all on the process's
// connection. It takes no context: a Lock call waits until it is granted.
type peerLib struct{ conn *zk.Conn }

func (p *peerLib) worker() (cmp.LockFn, error) {
	locks := map[string]*zk.Lock{}
	return func(_ context.Context, key string) (func(context.Context) error, error) {
		l := locks[key]
		if l == nil {
			l = zk.NewLock(p.conn, peerRoot+"/"+key, zk.WorldACL(zk.PermAll))
			locks[key] = l
		}
		if err := l.Lock(); err != nil {
			return nil, err
		}
		return func(context.Context) error { return l.Unlock() }, nil
	}, nil
}

func (p *peerLib) close() {}
