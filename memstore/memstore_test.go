package memstore_test

import (
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
	"example.com/dlock/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) driver.Mutex { return memstore.New(nil) })
}
