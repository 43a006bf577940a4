package zkstore

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// Negotiated learns the session timeout ZooKeeper grants a connection,
// which go-zookeeper/zk v1.0.4 does not expose: the server may grant less
// than was asked (its maxSessionTimeout) or more (its minSessionTimeout),
// and the store must count with what the server uses. Pass its Dial to
// zk.Connect (zk.WithDialer(n.Dial)) and the same value to
// Options.Negotiated; Dial does both.
//
// It reads the server's connect response, the first frame of every
// connection, and passes every byte through unchanged.
type Negotiated struct {
	mu      sync.Mutex
	timeout time.Duration // from the latest connect response with a session
	session int64
}

// Timeout returns the session timeout the server granted on the latest
// connection that established (or resumed) a session, and that session's
// id; 0, 0 before the first one.
func (n *Negotiated) Timeout() (time.Duration, int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.timeout, n.session
}

// Dial is a zk.Dialer (net.DialTimeout's signature) whose connections
// report their connect response to n. Its error is net.DialTimeout's.
func (n *Negotiated) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, n: n}, nil
}

// sniffConn copies the first frame it reads (the connect response) aside
// until it is whole, then parses it once.
type sniffConn struct {
	net.Conn
	n    *Negotiated
	head []byte
	done bool
}

// connectResponseMin is the length prefix plus protocolVersion, timeOut and
// sessionId of a connect response.
const connectResponseMin = 4 + 4 + 4 + 8

func (c *sniffConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	if !c.done && k > 0 {
		c.head = append(c.head, p[:k]...)
		if len(c.head) >= connectResponseMin {
			c.done = true
			to := int32(binary.BigEndian.Uint32(c.head[8:12]))
			sid := int64(binary.BigEndian.Uint64(c.head[12:20]))
			if sid != 0 && to > 0 {
				c.n.mu.Lock()
				c.n.timeout, c.n.session = time.Duration(to)*time.Millisecond, sid
				c.n.mu.Unlock()
			}
			c.head = nil
		}
	}
	return k, err
}
