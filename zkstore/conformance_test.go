package zkstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/zkserver"
	"github.com/go-zookeeper/zk"
)

// sessionTimeout is the conformance clients' session timeout: short, so
// that the session cases run quickly, and 15 tickTimes of the test server.
const sessionTimeout = 3 * time.Second

// The drivertest conformance suite on the shared standalone server, each
// client with its own session through its own fault proxy (Pause holds the
// bytes of every client both ways: an outage that loses nothing; Kill
// blackholes a client's requests and closes it, so that its session
// expires on the server after the timeout, as a crashed process's would).
func TestConformance(t *testing.T) {
	e := server(t)
	root := uniq(t)
	adm := admin(t)
	var mu sync.Mutex
	var all []proxied
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Store {
			c := dialProxied(t, root, sessionTimeout, e.Addrs()[0])
			mu.Lock()
			all = append(all, c)
			mu.Unlock()
			return reporting{c, adm}
		},
		Pause: func(t *testing.T) func() {
			mu.Lock()
			defer mu.Unlock()
			var resumes []func()
			for _, c := range all {
				resumes = append(resumes, c.p.Hold(faultproxy.Upstream), c.p.Hold(faultproxy.Downstream))
			}
			return func() {
				for _, r := range resumes {
					r()
				}
			}
		},
		Kill: func(t *testing.T, s driver.Store) { s.(reporting).crash() },
		// go-zookeeper keeps the session alive by itself; KeepAlive tells
		// the store for how long it is sure (as a dlock Client's renewals
		// would).
		Foreign: func(t *testing.T, key string) {
			p := root + "/" + key
			if err := mkdirs(adm, p); err != nil {
				t.Fatal(err)
			}
			if _, err := adm.Create(p+"/data", []byte("not a lock"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		},
		Slack: time.Second,
	})
}

// mkdirs creates path and its parents as persistent nodes.
func mkdirs(c *zk.Conn, path string) error {
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		if _, err := c.Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// reporting lets the suite count what the store keeps for a key: the lock
// path and its children. ZooKeeper deletes an empty container node when its
// container manager next runs (zkserver runs it every
// zkserver.ContainerCheckInterval).
type reporting struct {
	proxied
	adm *zk.Conn
}

func (r reporting) Retention() time.Duration { return 2 * zkserver.ContainerCheckInterval }

// KeyState counts the paths of key as a mutex, a read-write lock and a
// semaphore, and their children.
func (r reporting) KeyState(ctx context.Context, key string) (int, error) {
	n := 0
	for _, root := range []string{r.Root(), r.RWRoot(), r.SemRoot()} {
		ok, st, err := r.adm.Exists(root + "/" + encodeForTest(key))
		if err != nil {
			return 0, err
		}
		if ok {
			n += 1 + int(st.NumChildren)
		}
	}
	return n, nil
}

// encodeForTest is the store's path for the suite's keys, which have no
// characters the store escapes.
func encodeForTest(key string) string {
	if strings.ContainsAny(key, "%\n\r\t") {
		panic("encodeForTest: key needs escaping: " + key)
	}
	return key
}
