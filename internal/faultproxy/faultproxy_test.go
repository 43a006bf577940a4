package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetDeadline(start.Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	_, err := r.ReadString('\n')
	return time.Since(start), err
}

// proxied returns a proxy to an echo server and a connection through it,
// both closed when the test ends.
func proxied(t *testing.T) (*Proxy, net.Conn, *bufio.Reader) {
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return p, c, bufio.NewReader(c)
}

func TestFaults(t *testing.T) {
	p, c, r := proxied(t)
	if _, err := roundTrip(c, r, 2*time.Second); err != nil {
		t.Fatalf("clean: %v", err)
	}

	p.SetDelay(Downstream, 150*time.Millisecond)
	if d, err := roundTrip(c, r, 2*time.Second); err != nil || d < 150*time.Millisecond {
		t.Fatalf("delay: %v after %v", err, d)
	}
	p.Clear()

	p.Blackhole(Upstream, true)
	if _, err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatal("blackhole: reply arrived")
	}
	p.Clear()

	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	release := p.Hold(Downstream)
	if _, err := roundTrip(c2, r2, 200*time.Millisecond); err == nil {
		t.Fatal("hold: reply arrived while held")
	}
	release()
	_ = c2.SetDeadline(time.Now().Add(2 * time.Second))
	if line, err := r2.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("held reply not delivered after release: %q %v", line, err)
	}

	p.ResetAll()
	if _, err := roundTrip(c2, r2, 2*time.Second); err == nil {
		t.Fatal("reset: connection still works")
	}
}

// TestTurnsCountsRoundTrips: three request-reply exchanges are three
// turns, and a request written in two parts before its reply is one (the
// control for counting writes instead of turns, which would say two).
func TestTurnsCountsRoundTrips(t *testing.T) {
	p, c, r := proxied(t)
	for range 3 {
		if _, err := roundTrip(c, r, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.Turns(); got != 3 {
		t.Fatalf("Turns after 3 exchanges = %d, want 3", got)
	}
	p.SetDelay(Upstream, 20*time.Millisecond) // the two parts go as two chunks, the reply waits for both
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, part := range []string{"pi", "ng\n"} {
		if _, err := c.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if got := p.Turns(); got != 4 {
		t.Fatalf("Turns after a request in two writes = %d, want 4", got)
	}
}
