package driver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

func TestValidatePermits(t *testing.T) {
	bad := []struct {
		key  string
		n, k int
		ttl  time.Duration
	}{
		{"", 1, 1, time.Second}, {"k", 0, 1, time.Second}, {"k", -1, 1, time.Second},
		{"k", 2, 0, time.Second}, {"k", 2, 3, time.Second}, {"k", 2, 1, 0}, {"k", 2, 1, -time.Second},
		{strings.Repeat("x", driver.MaxKeyLen+1), 2, 1, time.Second},
	}
	for _, b := range bad {
		if err := driver.ValidatePermits(b.key, b.n, b.k, b.ttl); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ValidatePermits(%.10q, %d, %d, %v) = %v, want ErrInvalid", b.key, b.n, b.k, b.ttl, err)
		}
	}
	if err := driver.ValidatePermits("k", 3, 3, time.Millisecond); err != nil {
		t.Errorf("ValidatePermits of good arguments: %v", err)
	}
}

func TestSemaphoreErrorsMatchTheirSentinels(t *testing.T) {
	var taken error = &driver.PermitsTakenError{Used: 2, Limit: 2, Remaining: 1500 * time.Millisecond}
	if !errors.Is(taken, driver.ErrNotAcquired) || errors.Is(taken, driver.ErrInvalid) {
		t.Errorf("%v: want ErrNotAcquired only", taken)
	}
	if got := taken.Error(); !strings.Contains(got, "2 of 2 permits out") || !strings.Contains(got, "1.5s") {
		t.Errorf("PermitsTakenError text %q", got)
	}
	if got := (&driver.PermitsTakenError{Used: 1, Limit: 3, Remaining: -1}).Error(); strings.Contains(got, "ends in") {
		t.Errorf("unknown remaining printed: %q", got)
	}
	var mismatch error = &driver.LimitMismatchError{Stored: 3, Asked: 5}
	if !errors.Is(mismatch, driver.ErrInvalid) || errors.Is(mismatch, driver.ErrNotAcquired) {
		t.Errorf("%v: want ErrInvalid only", mismatch)
	}
	if got := mismatch.Error(); !strings.Contains(got, "3 permits") || !strings.Contains(got, "asked with 5") {
		t.Errorf("LimitMismatchError text %q", got)
	}
}
