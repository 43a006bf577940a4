package dlock_test

import (
	"errors"
	"strings"
	"testing"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// TestSharedNamesAreTheDriversNames checks that what moved below the user
// package (issue 24) is the same under its old name: the sentinel, the key
// limit and validation, and the clock types.
func TestSharedNamesAreTheDriversNames(t *testing.T) {
	if dlock.ErrStaleFence != driver.ErrStaleFence {
		t.Error("dlock.ErrStaleFence is not driver.ErrStaleFence")
	}
	if dlock.MaxKeyLen != driver.MaxKeyLen {
		t.Errorf("dlock.MaxKeyLen %d, driver.MaxKeyLen %d", dlock.MaxKeyLen, driver.MaxKeyLen)
	}
	var c dlock.Clock
	var _ driver.Clock = c // same type: assignable both ways
	var tm driver.Timer
	var _ dlock.Timer = tm
	for _, k := range []string{"", strings.Repeat("k", dlock.MaxKeyLen+1), "\xff", "ok", strings.Repeat("k", dlock.MaxKeyLen)} {
		e1, e2 := dlock.ValidateKey(k), driver.ValidateKey(k)
		if (e1 == nil) != (e2 == nil) || (e1 != nil && (e1.Error() != e2.Error() || !errors.Is(e1, dlock.ErrInvalid))) {
			t.Errorf("key %q: dlock.ValidateKey %v, driver.ValidateKey %v", k, e1, e2)
		}
	}
}
