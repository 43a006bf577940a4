package redisserver

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"
)

// clusterTimeout bounds cluster creation and convergence.
const clusterTimeout = 20 * time.Second

// Cluster is a Redis Cluster of primaries without replicas, every node a
// Server in its own directory. All nodes are killed when the test ends.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts masters (at least 3) cluster-enabled servers
// (--cluster-node-timeout 2000) with opts, joins them with
// "redis-cli --cluster create ... --cluster-replicas 0" and waits until every
// node reports cluster_state:ok, all 16384 slots and all other nodes. It
// skips like Start when redis-server or redis-cli is missing and fails the
// test on any other error, including redis-cli's output.
func StartCluster(t testing.TB, masters int, opts ...Option) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redisserver: StartCluster needs at least 3 masters, got %d", masters)
	}
	requireBinaries(t, "redis-cli")
	nodes := StartN(t, masters, slices.Concat(opts, []Option{withCluster()})...)
	c := &Cluster{nodes: nodes}
	if err := c.create(); err != nil {
		t.Fatalf("%v", err)
	}
	if err := poll("cluster_state:ok", clusterTimeout, 50*time.Millisecond, c.healthy); err != nil {
		t.Fatalf("%v", err)
	}
	return c
}

// Addrs returns the "127.0.0.1:port" addresses of all nodes, in start order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the nodes in start order. The slice is a copy; the Servers
// are shared, so Kill, Pause or Restart on them affects the cluster.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// create runs redis-cli --cluster create over all nodes.
func (c *Cluster) create() error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redisserver: redis-cli --cluster create: %w\n%s", err, out)
	}
	return nil
}

// healthy checks CLUSTER INFO on every node.
func (c *Cluster) healthy() error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_ok":       "16384",
		"cluster_known_nodes":    strconv.Itoa(len(c.nodes)),
		"cluster_slots_assigned": "16384",
	}
	for _, n := range c.nodes {
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			return err
		}
		for k, v := range want {
			if got := infoField(info, k); got != v {
				return fmt.Errorf("%s: %s is %q, want %q", n.Addr(), k, got, v)
			}
		}
	}
	return nil
}
