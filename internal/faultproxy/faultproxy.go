// Package faultproxy is an in-test TCP proxy on loopback that injects
// network faults between a client and a server, modelled on etcd's
// robustness proxy: latency, blackholes, held replies (bytes buffered and
// delivered late, as in Kleppmann's "packets held in a kernel buffer") and
// connection resets. Faults apply per direction to every connection.
package faultproxy

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction selects which bytes a fault applies to.
type Direction int

// Directions: Upstream is client → server (requests), Downstream is
// server → client (replies).
const (
	Upstream Direction = iota
	Downstream
)

// Proxy forwards connections from its loopback listener to one target.
// All methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	delay     [2]time.Duration
	blackhole [2]bool
	held      [2]chan struct{} // closed when a Hold ends; nil if not held
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
	turns     atomic.Int64
}

// New listens on 127.0.0.1 on a free port and forwards to target. It returns
// an error if it cannot listen. Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Turns returns how many times, over all connections so far, the server
// sent bytes after the client had sent some since the server last did:
// the round trips the proxy carried, whatever the latency. A request sent
// in several writes, or a reply read in several chunks, counts once.
func (p *Proxy) Turns() int64 { return p.turns.Load() }

// SetDelay delays every chunk of bytes in direction d by delay (0 removes it).
func (p *Proxy) SetDelay(d Direction, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay[d] = delay
}

// Blackhole makes the proxy read and discard bytes in direction d while on
// is true: the peer sees silence, as in a partition.
func (p *Proxy) Blackhole(d Direction, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole[d] = on
}

// Hold stops forwarding in direction d, buffering what arrives, until the
// returned function is called; then the buffered bytes are delivered in
// order. Calling the function more than once is harmless.
func (p *Proxy) Hold(d Direction) (release func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.held[d] = ch
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			if p.held[d] == ch {
				p.held[d] = nil
			}
			p.mu.Unlock()
			close(ch)
		})
	}
}

// Clear removes every delay, blackhole and hold.
func (p *Proxy) Clear() {
	p.mu.Lock()
	held := p.held
	p.delay, p.blackhole, p.held = [2]time.Duration{}, [2]bool{}, [2]chan struct{}{}
	p.mu.Unlock()
	for _, ch := range held {
		if ch != nil {
			close(ch)
		}
	}
}

// ResetAll closes every open connection (the client sees a reset or EOF);
// new connections are accepted as before.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST rather than FIN
		}
		_ = c.Close()
	}
}

// Close stops the listener, closes every connection and waits for the
// proxy's goroutines to end. It releases held bytes first.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Clear()
	p.ResetAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		last := new(atomic.Int32) // the direction of the connection's latest bytes
		last.Store(int32(Downstream))
		go p.pump(s, c, Upstream, last)
		go p.pump(c, s, Downstream, last)
	}
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
		_ = c.Close()
	}
}

// faults returns the faults currently set for d.
func (p *Proxy) faults(d Direction) (time.Duration, bool, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay[d], p.blackhole[d], p.held[d]
}

// pump copies src to dst applying d's faults to each chunk read, and
// counts a turn when the server speaks after the client (last is the
// direction of the connection's latest bytes). Closing either end ends
// both directions.
func (p *Proxy) pump(dst, src net.Conn, d Direction, last *atomic.Int32) {
	defer p.wg.Done()
	defer p.untrack(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.forward(dst, buf[:n], d, last) {
			return
		}
		if err != nil {
			return // EOF, reset or closed: either end gone ends both
		}
	}
}

func (p *Proxy) forward(dst net.Conn, b []byte, d Direction, last *atomic.Int32) bool {
	delay, hole, held := p.faults(d)
	if held != nil {
		<-held
	}
	if hole {
		return true
	}
	if delay > 0 {
		time.Sleep(delay) // the fault under test: latency
	}
	// Before the write, so that a reply cannot be read before the request
	// is marked sent.
	if prev := last.Swap(int32(d)); d == Downstream && prev == int32(Upstream) {
		p.turns.Add(1)
	}
	_, err := dst.Write(b)
	return err == nil
}
