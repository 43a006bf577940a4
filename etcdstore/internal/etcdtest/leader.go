package etcdtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Client returns a client of every member's endpoint, closed when the test
// ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, c.Endpoints()...)
}

// NewClient returns a client of endpoints (host:port or URLs), closed when
// the test ends.
func NewClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Leader returns the member that is leader as every running member it can
// ask sees it, or an error if none answers or they disagree.
func (c *Cluster) Leader(ctx context.Context, cli *clientv3.Client) (*Member, error) {
	var leader uint64
	for _, m := range c.Members {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err != nil {
			continue
		}
		if leader != 0 && st.Leader != leader {
			return nil, fmt.Errorf("etcdtest: members disagree on the leader")
		}
		leader = st.Leader
	}
	if leader == 0 {
		return nil, fmt.Errorf("etcdtest: no leader")
	}
	for _, m := range c.Members {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err == nil && st.Header.MemberId == leader {
			return m, nil
		}
	}
	return nil, fmt.Errorf("etcdtest: leader %x is not a running member", leader)
}
