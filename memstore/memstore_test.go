package memstore_test

import (
	"testing"

	"example.com/dlock"
	"example.com/dlock/memstore"
	"example.com/dlock/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) dlock.Store { return memstore.New(nil) })
}
