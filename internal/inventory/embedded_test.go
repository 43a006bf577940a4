package inventory

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/redisstore"
	"example.com/dlock/storetest"
)

// The library's own Redis store must pass the conformance suite on the
// embedded server, or the demo's `dlock` column would prove nothing.
func TestRedisstoreConformanceOnEmbedded(t *testing.T) {
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rdb := redis.NewClient(&redis.Options{Addr: e.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	storetest.Run(t, func(t *testing.T) dlock.Store {
		s, err := redisstore.New(rdb, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
