package redlock_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redlock"
)

func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// doctorOver runs the checks of a Redlock store over addrs.
func doctorOver(t *testing.T, addrs ...string) map[string]driver.Check {
	t.Helper()
	var clients []redis.UniversalClient
	for _, a := range addrs {
		clients = append(clients, newRedisClient(t, a))
	}
	s, err := redlock.NewRedis(clients, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	m := map[string]driver.Check{}
	for _, c := range s.Doctor(testCtx(t), 30*time.Second) {
		m[c.Name] = c
	}
	return m
}

func status(t *testing.T, m map[string]driver.Check, name string, want driver.Status) {
	t.Helper()
	if c, ok := m[name]; !ok || c.Status != want {
		t.Errorf("%s: got %+v (present %t), want status %d", name, c, ok, want)
	}
}

// TestDoctorPerNodeAndQuorum: each live node gets every server check under
// its address; a node that refuses connections gets one Fail, connection;
// the quorum check warns that one more failure stops locking.
func TestDoctorPerNodeAndQuorum(t *testing.T) {
	srvs := redisserver.StartN(t, 2)
	down := closedAddr(t)
	m := doctorOver(t, srvs[0].Addr(), srvs[1].Addr(), down)
	for _, s := range srvs {
		for _, name := range []string{"version", "maxmemory-policy", "persistence", "replication", "latency", "acl"} {
			if _, ok := m[s.Addr()+"/"+name]; !ok {
				t.Errorf("no %s/%s in %v", s.Addr(), name, m)
			}
		}
	}
	n := 0
	for name := range m {
		if strings.HasPrefix(name, down+"/") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("down node: want exactly one check, got %d", n)
	}
	status(t, m, down+"/connection", driver.Fail)
	status(t, m, "quorum", driver.Warn)
	status(t, m, "nodes", driver.OK)
	status(t, m, "independence", driver.OK)
	status(t, m, "fencing", driver.OK)
}

// TestDoctorCatchesOneServerCountedTwice: the same server given twice
// (negative control: three distinct servers pass) fails independence; two
// nodes down fail the quorum; two nodes tolerate no failure.
func TestDoctorCatchesOneServerCountedTwice(t *testing.T) {
	srvs := redisserver.StartN(t, 2)
	a, b := srvs[0].Addr(), srvs[1].Addr()
	m := doctorOver(t, a, b, "localhost:"+a[strings.LastIndex(a, ":")+1:])
	status(t, m, "independence", driver.Fail)
	if d := m["independence"].Detail; !strings.Contains(d, a) {
		t.Errorf("independence does not name %s: %s", a, d)
	}
	status(t, m, "quorum", driver.OK)

	m = doctorOver(t, a, closedAddr(t), closedAddr(t))
	status(t, m, "quorum", driver.Fail)
	m = doctorOver(t, a, b)
	status(t, m, "nodes", driver.Warn)
	status(t, m, "independence", driver.OK)
}
