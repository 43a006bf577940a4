package redisstore_test

import (
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit/clienttest"
)

// Holdings of one Owner on one key never shorten each other's record (issue
// 23, schedules a, b and c, each with its broken-expiry control), on a real
// Redis with the other client on its own connection. (Was the "redis"
// variant of the root package's TestNestedHoldingsNeverShortenEachOther;
// the memstore variant stays there.)
func TestNestedHoldingsNeverShortenEachOther(t *testing.T) {
	clienttest.NestedHoldingsNeverShortenEachOther(t, false, func(t *testing.T) (driver.Mutex, driver.Mutex) {
		e := startRedis(t, false)
		return redisStore(t, e.addr()), redisStore(t, e.addr())
	})
}
