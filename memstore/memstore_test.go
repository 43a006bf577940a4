package memstore_test

import (
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/memstore"
)

// TestConformance runs the suite on one in-memory store shared by every
// client New returns, as clients of one server share its state.
func TestConformance(t *testing.T) {
	s := memstore.New(nil)
	drivertest.Run(t, drivertest.Harness{New: func(*testing.T) driver.Store { return s }})
}
