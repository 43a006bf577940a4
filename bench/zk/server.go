package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/internal/zkserver"
	"github.com/go-zookeeper/zk"
)

// sessionTimeout is both libraries' session timeout.
const sessionTimeout = 10 * time.Second

// server is one standalone ZooKeeper server started with internal/zkserver
// (the tests' harness) in a temporary directory.
type server struct {
	e    *zkserver.Ensemble
	dir  string
	Addr string
	tick time.Duration
}

// startZK starts the server and waits until it serves. On error the
// temporary directory is removed and the process killed.
func startZK() (*server, error) {
	java, err := zkserver.Find()
	if err != nil {
		return nil, fmt.Errorf("%w (install Debian's zookeeper package)", err)
	}
	dir, err := os.MkdirTemp("", "dlockbench-zk-")
	if err != nil {
		return nil, err
	}
	e, err := zkserver.Launch(java, dir, 1)
	if err != nil {
		if e != nil {
			e.Close()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	return &server{e: e, dir: dir, Addr: e.Addrs()[0], tick: zkserver.TickTime}, nil
}

// stop kills the server and removes its directory.
func (s *server) stop() {
	s.e.Close()
	os.RemoveAll(s.dir)
}

// version is the server's version as srvr reports it.
func (s *server) version() string {
	out, err := zkserver.FourLetter(s.Addr, "srvr", 2*time.Second)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "Zookeeper version: "); ok {
			v, _, _ = strings.Cut(v, "-")
			return v
		}
	}
	return "unknown"
}

// packets returns the server's zk_packets_received (every request it has
// read from every client: creates, reads, deletes, watches set by reads,
// pings, connects) from mntr.
func (s *server) packets() (int64, error) {
	out, err := zkserver.FourLetter(s.Addr, "mntr", 2*time.Second)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "zk_packets_received\t"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no zk_packets_received in mntr: %q", out)
}

// dial connects to addr and waits (at most 10 s) for a session.
func dial(addr string) (*zk.Conn, error) {
	conn, events, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-deadline:
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session with %s in 10 s", addr)
		}
	}
}
