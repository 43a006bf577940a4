package dlock_test

import (
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit/clienttest"
	"example.com/dlock/memstore"
)

// Holdings of one Owner on one key never shorten each other's record (issue
// 23, schedules a, b and c, each with its broken-expiry control): the
// schedules are in clienttest; here on memstore in synctest bubbles (the
// schedules' waits cost no real time), in redisstore's tests on a
// real Redis (TestNestedHoldingsNeverShortenEachOther there).
func TestNestedHoldingsNeverShortenEachOther(t *testing.T) {
	clienttest.NestedHoldingsNeverShortenEachOther(t, true, func(*testing.T) (driver.Mutex, driver.Mutex) {
		s := memstore.New(nil)
		return s, s
	})
}
