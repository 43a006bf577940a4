package chaos_test

import (
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// childEnv selects the role of a re-executed test binary: an app instance
// (see traffic_test.go) instead of the test runner.
const childEnv = "DLOCK_CHAOS_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}

// newRedis starts a redis-server and returns it with a direct client.
func newRedis(t *testing.T, opts ...redisserver.Option) (*redisserver.Server, *redis.Client) {
	t.Helper()
	srv := redisserver.Start(t, opts...)
	return srv, newClient(t, srv.Addr())
}

// newClient returns a go-redis client for addr with short timeouts, so a
// fault turns into an error quickly; closed when the test ends.
func newClient(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(clientOptions(addr))
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr: addr, DialTimeout: time.Second, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, MaxRetries: -1, PoolSize: 16,
	}
}

// testCtx is the shared helper (internal/testkit).
var testCtx = testkit.CtxFor
