package redlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/redlock"
)

func TestMain(m *testing.M) {
	// Killed nodes make go-redis log every failed dial; the tests assert on
	// errors instead.
	redis.SetLogger(quietLogger{})
	// go-redis retries dialing a dead server from a pool goroutine that
	// sleeps a second between attempts and notices Close only then.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// cluster is n independent redis-server primaries with one client each.
type cluster struct {
	servers []*redisserver.Server
	clients []redis.UniversalClient
}

// newRedisClient returns a client whose socket I/O honours context
// deadlines, so the node timeout bounds it, and that neither retries
// commands nor dials (see redlock.ClientOptions).
func newRedisClient(t testing.TB, addr string) *redis.Client {
	o := &redis.Options{Addr: addr}
	redlock.ClientOptions(o)
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func startCluster(t testing.TB, n int, opts ...redisserver.Option) *cluster {
	t.Helper()
	c := &cluster{servers: redisserver.StartN(t, n, opts...)}
	for _, s := range c.servers {
		c.clients = append(c.clients, newRedisClient(t, s.Addr()))
	}
	return c
}

// store returns a Redlock store over the cluster's clients (fresh pub/sub
// state: tests that model independent processes take one store each).
func (c *cluster) store(t testing.TB, opts *redlock.Options) *redlock.Store {
	t.Helper()
	s, err := redlock.NewRedis(c.clients, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// independentStore builds a store over new clients of its own, like another
// process would.
func (c *cluster) independentStore(t testing.TB, opts *redlock.Options) *redlock.Store {
	t.Helper()
	var clients []redis.UniversalClient
	for _, s := range c.servers {
		clients = append(clients, newRedisClient(t, s.Addr()))
	}
	s, err := redlock.NewRedis(clients, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newClient(t testing.TB, s driver.Mutex, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	return c
}

// testCtx and waitFor are the shared helpers (internal/testkit).
var (
	testCtx = testkit.Ctx
	waitFor = testkit.WaitFor
)

// delayedRestart enforces the Redlock restart rule for nodes without fsync'd
// persistence: a crashed node stays down for at least the longest TTL in use
// (plus the drift allowance and a margin) before it rejoins empty, so every
// lock it held has expired on its own clock before it can grant again.
// Sleeping here is the rule under test, not synchronisation.
func delayedRestart(t testing.TB, s *redisserver.Server, maxTTL time.Duration) {
	t.Helper()
	s.Kill()
	time.Sleep(maxTTL + maxTTL/100 + 2*time.Millisecond + 50*time.Millisecond)
	s.Restart(t)
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
