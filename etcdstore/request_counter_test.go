package etcdstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
)

// requestCounter counts what a Store asks of etcd, by kind: transactions,
// reads (Get), puts, lease requests (grant, revoke, keep-alive
// once, time to live) and watches started (each a round trip to register
// it). It wraps a client's KV, Lease and Watcher before the Store is made.
type requestCounter struct{ txn, get, put, lease, watch atomic.Int64 }

type countingKV struct {
	clientv3.KV
	rc *requestCounter
}

func (c countingKV) Txn(ctx context.Context) clientv3.Txn { c.rc.txn.Add(1); return c.KV.Txn(ctx) }

func (c countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.rc.get.Add(1)
	return c.KV.Get(ctx, key, opts...)
}

func (c countingKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	c.rc.put.Add(1)
	return c.KV.Put(ctx, key, val, opts...)
}

type countingLease struct {
	clientv3.Lease
	n *atomic.Int64
}

func (c countingLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	c.n.Add(1)
	return c.Lease.Grant(ctx, ttl)
}

func (c countingLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	c.n.Add(1)
	return c.Lease.Revoke(ctx, id)
}

func (c countingLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	c.n.Add(1)
	return c.Lease.KeepAliveOnce(ctx, id)
}

type countingWatcher struct {
	clientv3.Watcher
	n *atomic.Int64
}

func (c countingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	c.n.Add(1)
	return c.Watcher.Watch(ctx, key, opts...)
}

// countedStore is a Store on a client of c whose requests rc counts.
func countedStore(t testing.TB, c *etcdtest.Cluster, rc *requestCounter) *etcdstore.Store {
	t.Helper()
	cli := c.Client(t)
	cli.KV = countingKV{cli.KV, rc}
	cli.Lease = countingLease{cli.Lease, &rc.lease}
	cli.Watcher = countingWatcher{cli.Watcher, &rc.watch}
	s, err := etcdstore.New(cli, etcdstore.Options{Prefix: uniq(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// report notes the counts now and returns a func that reports the counts
// since then per operation of b.
func (rc *requestCounter) report(b *testing.B) func() {
	txn, get, put, lease, watch := rc.txn.Load(), rc.get.Load(), rc.put.Load(), rc.lease.Load(), rc.watch.Load()
	return func() {
		if b.N == 0 {
			return
		}
		n := float64(b.N)
		b.ReportMetric(float64(rc.txn.Load()-txn)/n, "txn/op")
		b.ReportMetric(float64(rc.get.Load()-get)/n, "get/op")
		b.ReportMetric(float64(rc.put.Load()-put)/n, "put/op")
		b.ReportMetric(float64(rc.lease.Load()-lease)/n, "lease/op")
		b.ReportMetric(float64(rc.watch.Load()-watch)/n, "watches/op")
	}
}
