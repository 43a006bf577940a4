package driver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

func TestValidateRW(t *testing.T) {
	for _, b := range []struct {
		key string
		ttl time.Duration
	}{{"", time.Second}, {"k", 0}, {"k", -time.Second}, {strings.Repeat("x", driver.MaxKeyLen+1), time.Second}, {"\xff", time.Second}} {
		if err := driver.ValidateRW(b.key, b.ttl); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ValidateRW(%.10q, %v) = %v, want ErrInvalid", b.key, b.ttl, err)
		}
	}
	if err := driver.ValidateRW("k", time.Millisecond); err != nil {
		t.Errorf("ValidateRW of good arguments: %v", err)
	}
}

func TestRWErrorsMatchTheirSentinels(t *testing.T) {
	if !errors.Is(driver.ErrUpgrade, driver.ErrInvalid) || errors.Is(driver.ErrUpgrade, driver.ErrNotAcquired) {
		t.Errorf("ErrUpgrade: want ErrInvalid only")
	}
	var taken error = &driver.RWTakenError{Held: driver.RWRead, Readers: 2, WriterWaiting: true, Remaining: 1500 * time.Millisecond}
	if !errors.Is(taken, driver.ErrNotAcquired) || errors.Is(taken, driver.ErrInvalid) {
		t.Errorf("%v: want ErrNotAcquired only", taken)
	}
	if got := taken.Error(); !strings.Contains(got, "2 readers") || !strings.Contains(got, "writer is waiting") || !strings.Contains(got, "1.5s") {
		t.Errorf("RWTakenError text %q", got)
	}
	if got := (&driver.RWTakenError{Held: driver.RWWrite, Remaining: -1}).Error(); !strings.Contains(got, "writer") || strings.Contains(got, "ends in") {
		t.Errorf("RWTakenError text with Remaining unknown: %q", got)
	}
	if driver.RWRead.String() != "read" || driver.RWWrite.String() != "write" || driver.RWMode(0).String() != "none" {
		t.Error("RWMode.String")
	}
}
