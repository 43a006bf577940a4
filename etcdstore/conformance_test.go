package etcdstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/etcdstore"
	"example.com/dlock/internal/faultproxy"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The drivertest conformance suite on a single node, every client through
// one fault proxy (Pause holds the bytes both ways: an outage that loses
// nothing), with a realistic 5 s session that the suite renews between
// calls through Harness.KeepAlive (Store.KeepAlive), as a dlock Client
// would.
func TestConformance(t *testing.T) {
	c := node(t)
	p, err := faultproxy.New(c.Members[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	pfx := uniq(t)
	admin := c.Client(t)
	var mu sync.Mutex
	clients := map[driver.Store]*clientv3.Client{}
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Store {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			s, err := etcdstore.New(cli, etcdstore.Options{Prefix: pfx, SessionTTL: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r := reporting{s, admin, pfx}
			mu.Lock()
			clients[r] = cli
			mu.Unlock()
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				_ = s.Close(ctx)
				cli.Close()
			})
			return r
		},
		Pause: func(t *testing.T) func() {
			up, down := p.Hold(faultproxy.Upstream), p.Hold(faultproxy.Downstream)
			return func() { up(); down() }
		},
		Kill: func(t *testing.T, s driver.Store) {
			mu.Lock()
			cli := clients[s]
			mu.Unlock()
			cli.Close() // no revoke: the session ends with its TTL
		},
		Foreign: func(t *testing.T, key string) {
			if _, err := admin.Put(context.Background(), pfx+key+"/data", "not a lock"); err != nil {
				t.Fatal(err)
			}
		},
		Slack: time.Second, // etcd checks lease expiry every 500 ms
	})
}

// reporting lets the suite count what the store keeps for a key: the keys
// under its prefixes (as a Mutex, a Semaphore and an RWMutex). etcd keeps
// nothing once they are deleted.
type reporting struct {
	*etcdstore.Store
	admin *clientv3.Client
	pfx   string
}

func (r reporting) Retention() time.Duration { return 0 }

func (r reporting) KeyState(ctx context.Context, key string) (int, error) {
	sem, rw := etcdstore.FamilyPrefixes(r.pfx, key)
	n := 0
	for _, p := range []string{r.pfx + key + "/", sem, rw} {
		resp, err := r.admin.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		n += int(resp.Count)
	}
	return n, nil
}
