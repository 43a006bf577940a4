package redisserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sentinelTimeout bounds the convergence of the sentinel topology.
const sentinelTimeout = 20 * time.Second

// Sentinel is a primary, one replica and three sentinels monitoring the
// primary as "mymaster" with quorum 2, down-after-milliseconds 1000 and
// failover-timeout 3000. All processes are killed when the test ends.
type Sentinel struct {
	primary, replica *Server
	sentinels        []*Server
}

// StartSentinel starts the primary and the replica (--replicaof the primary),
// both with opts, waits until the replica's link is up, then starts three
// sentinels, each with a generated sentinel.conf in its own directory, and
// waits until every sentinel knows the primary, the replica and the two
// other sentinels. It skips like Start when redis-server is missing and fails
// the test on any other error.
func StartSentinel(t testing.TB, opts ...Option) *Sentinel {
	t.Helper()
	primary := Start(t, opts...)
	replicaOpts := slices.Concat(opts, []Option{WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()))})
	replica := Start(t, replicaOpts...)
	err := poll("replica link up", sentinelTimeout, 20*time.Millisecond, func() error {
		info, err := replica.Do("INFO", "replication")
		if err == nil && infoField(info, "master_link_status") != "up" {
			err = fmt.Errorf("master_link_status %q", infoField(info, "master_link_status"))
		}
		return err
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	s := &Sentinel{primary: primary, replica: replica}
	s.sentinels = StartN(t, 3, withSentinel(primary.Port()))
	for _, sn := range s.sentinels {
		if err := poll("sentinel "+sn.Addr()+" ready", sentinelTimeout, 50*time.Millisecond,
			func() error { return sentinelReady(sn) }); err != nil {
			t.Fatalf("%v", err)
		}
	}
	return s
}

// sentinelReady checks that sn sees the master with a replica and the two
// other sentinels.
func sentinelReady(sn *Server) error {
	reply, err := sn.Do("SENTINEL", "MASTER", sentinelName)
	if err != nil {
		return err
	}
	kv := pairs(reply)
	if kv["flags"] != "master" || kv["num-slaves"] == "0" || kv["num-other-sentinels"] != "2" {
		return fmt.Errorf("%s: flags=%q num-slaves=%q num-other-sentinels=%q",
			sn.Addr(), kv["flags"], kv["num-slaves"], kv["num-other-sentinels"])
	}
	return nil
}

// pairs parses a rendered flat key/value array reply.
func pairs(reply string) map[string]string {
	lines := strings.Split(reply, "\n")
	kv := make(map[string]string, len(lines)/2)
	for i := 0; i+1 < len(lines); i += 2 {
		kv[lines[i]] = lines[i+1]
	}
	return kv
}

// MasterName returns the monitored master's name, "mymaster".
func (s *Sentinel) MasterName() string { return sentinelName }

// SentinelAddrs returns the "127.0.0.1:port" addresses of the three
// sentinels.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		addrs[i] = sn.Addr()
	}
	return addrs
}

// Sentinels returns the three sentinel processes (for Kill or Pause in
// chaos tests). The slice is a copy.
func (s *Sentinel) Sentinels() []*Server {
	return append([]*Server(nil), s.sentinels...)
}

// Primary returns the server started as primary. After a failover it may
// have become a replica; use MasterAddr for the current master.
func (s *Sentinel) Primary() *Server { return s.primary }

// Replica returns the server started as replica. After a failover it may
// have become the master.
func (s *Sentinel) Replica() *Server { return s.replica }

// MasterAddr asks the sentinels, in order, for the current master address
// ("127.0.0.1:port") and returns the first answer. It returns an error
// joining the sentinels' errors if none answers within ctx.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, sn := range s.sentinels {
		reply, err := sn.DoContext(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinelName)
		if err == nil {
			if host, port, ok := strings.Cut(reply, "\n"); ok {
				return host + ":" + port, nil
			}
			err = fmt.Errorf("unexpected reply %q", reply)
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("redisserver: no sentinel knows %s: %w", sentinelName, errors.Join(errs...))
}
