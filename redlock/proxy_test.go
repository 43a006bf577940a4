package redlock_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// latencyProxy is a small in-test TCP proxy on loopback that delays every
// chunk of data by a settable latency in each direction (order preserved).
// It is local to this package's tests on purpose: other branches may grow a
// shared fault proxy.
type latencyProxy struct {
	ln       net.Listener
	upstream string
	latency  atomic.Int64 // nanoseconds, per direction

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(t testing.TB, upstream string) *latencyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &latencyProxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *latencyProxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays each direction by d from now on.
func (p *latencyProxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

func (p *latencyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, holding each chunk until its due time. A second
// goroutine per direction does the delayed writes so that reading goes on.
func (p *latencyProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range q {
			time.Sleep(time.Until(ch.due)) // the latency is the fault under test
			if _, err := dst.Write(ch.data); err != nil {
				_ = src.Close()
				for range q {
				}
				return
			}
		}
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(time.Duration(p.latency.Load()))}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}

func (p *latencyProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
