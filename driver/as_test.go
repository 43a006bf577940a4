package driver_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// nop is a Mutex with no capability.
type nop struct{}

// inner is a Mutex with one capability (Inspector).
type inner struct{ driver.Mutex }

func (inner) Inspect(context.Context, string) (driver.Info, error) { return driver.Info{}, nil }

// storeWrapper wraps a store through Unwrap() Store; mutexWrapper through
// the earlier Unwrap() Mutex; hiding wraps nothing (Unwrap returns nil).
type (
	storeWrapper struct{ s driver.Store }
	mutexWrapper struct{ driver.Mutex }
	hiding       struct{ driver.Mutex }
)

func (w storeWrapper) Model() driver.Model  { return w.s.Model() }
func (w storeWrapper) Unwrap() driver.Store { return w.s }
func (w mutexWrapper) Unwrap() driver.Mutex { return w.Mutex }
func (hiding) Unwrap() driver.Store         { return nil }
func (nop) Model() driver.Model             { return driver.Model{} }
func (nop) Acquire(context.Context, string, string, time.Duration) (driver.Grant, error) {
	return driver.Grant{}, nil
}
func (nop) Extend(context.Context, string, string, time.Duration) (driver.Grant, error) {
	return driver.Grant{}, nil
}
func (nop) Release(context.Context, string, string) error { return nil }

// TestAsLooksThroughEitherUnwrap: As finds a capability through a wrapper
// of any Store (Unwrap() Store, a wrapper that is no Mutex itself) and
// through one written before Store (Unwrap() Mutex); the controls are a
// wrapper that hides its store (Unwrap returns nil) and a store without
// the capability, where As reports false.
func TestAsLooksThroughEitherUnwrap(t *testing.T) {
	in := inner{nop{}}
	for _, tc := range []struct {
		name string
		s    driver.Store
		want bool
	}{
		{"Unwrap() Store", storeWrapper{in}, true},
		{"Unwrap() Mutex", mutexWrapper{in}, true},
		{"both, nested", storeWrapper{mutexWrapper{in}}, true},
		{"hidden (control)", hiding{in}, false},
		{"no capability (control)", storeWrapper{nop{}}, false},
	} {
		if _, ok := driver.As[driver.Inspector](tc.s); ok != tc.want {
			t.Errorf("%s: As[Inspector] = %v, want %v", tc.name, ok, tc.want)
		}
	}
}
