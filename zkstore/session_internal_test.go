package zkstore

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestConnLossMarksTransportErrors: the error a write to a socket the
// server closed gives (what go-zookeeper hands back for a request sent on a
// dead connection) counts as a connection loss, not as the server's answer;
// the server's own errors pass through unchanged.
func TestConnLossMarksTransportErrors(t *testing.T) {
	raw := deadSocketWriteError(t)
	if errors.Is(raw, zk.ErrConnectionClosed) {
		t.Fatalf("control: the raw socket error %v already reads as a connection loss", raw)
	}
	err := connLoss(raw)
	if !errors.Is(err, zk.ErrConnectionClosed) || !errors.Is(err, raw) || replied(err) {
		t.Fatalf("connLoss(%v) = %v: want a connection loss that keeps the cause", raw, err)
	}
	for _, e := range []error{nil, zk.ErrNoNode, zk.ErrBadVersion, zk.ErrSessionExpired, zk.ErrConnectionClosed} {
		if got := connLoss(e); got != e {
			t.Errorf("connLoss(%v) = %v, want it unchanged", e, got)
		}
	}
}

// deadSocketWriteError writes to a loopback connection whose peer closed
// it until the write fails, and returns that error (EPIPE or ECONNRESET).
func deadSocketWriteError(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = peer.(*net.TCPConn).SetLinger(0) // close with a reset
	peer.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
	}
	t.Fatal("writes to a closed peer kept succeeding for 10 s")
	return nil
}
