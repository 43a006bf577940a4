package main

import (
	"context"
	"net"
	"sync/atomic"
)

// counter counts database round trips of every connection a client process
// dials: a round trip is a write that follows a read on one connection (the
// client sends a request after it read the previous answer). It counts what
// both wire protocols cost, whatever the library sends (statements,
// BEGIN/COMMIT, prepares, pings, LISTEN), and does not count a notification
// the server pushes (a read with no write). Connection set-up (startup and
// authentication) counts too, so connections are opened during the warm-up.
//
// It also counts statements (stmtParser): dial sets which protocol.
type counter struct {
	trips atomic.Int64
	dials atomic.Int64
	stmts atomic.Int64
	mysql bool // the connections speak MySQL's protocol, not PostgreSQL's
}

// dial opens a TCP connection whose round trips c counts.
func (c *counter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.dials.Add(1)
	cc := &countedConn{Conn: conn, c: c}
	cc.p = stmtParser{mysql: c.mysql, count: func() { c.stmts.Add(1) }}
	cc.read.Store(true) // the first write starts a round trip
	return cc, nil
}

// countedConn is a net.Conn that counts read-to-write turns. It does not
// expose syscall.Conn, so drivers cannot read around it.
type countedConn struct {
	net.Conn
	c    *counter
	read atomic.Bool // the last operation with data was a read
	p    stmtParser  // only Write uses it (a driver writes from one goroutine at a time)
}

func (cc *countedConn) Read(p []byte) (int, error) {
	n, err := cc.Conn.Read(p)
	if n > 0 {
		cc.read.Store(true)
	}
	return n, err
}

func (cc *countedConn) Write(p []byte) (int, error) {
	if len(p) > 0 && cc.read.Swap(false) {
		cc.c.trips.Add(1)
	}
	n, err := cc.Conn.Write(p)
	cc.p.feed(p[:n])
	return n, err
}
