package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// TestModelAndCapabilities: the declared model (10 ms, millisecond
// granularity, the server's clock, per-key) and every capability the
// package doc lists, found with driver.As.
func TestModelAndCapabilities(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // no I/O below
	defer rdb.Close()
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := driver.Model{MinTTL: 10 * time.Millisecond, Granularity: time.Millisecond, ServerClock: true}
	if m := s.Model(); m != want {
		t.Errorf("Model = %+v, want %+v", m, want)
	}
	var m driver.Mutex = s
	for name, ok := range map[string]bool{
		"Notifier":      has[driver.Notifier](m),
		"BatchExtender": has[driver.BatchExtender](m),
		"Transferer":    has[driver.Transferer](m),
		"Atomic":        has[driver.Atomic](m),
		"Inspector":     has[driver.Inspector](m),
		"Lister":        has[driver.Lister](m),
		"WaiterCounter": has[driver.WaiterCounter](m),
		"Doctor":        has[driver.Doctor](m),
	} {
		if !ok {
			t.Errorf("not a %s", name)
		}
	}
	if has[driver.Queuer](m) {
		t.Error("a Queuer: Redis has no queue of its own (only NewFair's store queues)")
	}
}

// TestFairModelAndCapabilities: the fair store has the same model, is a
// Queuer, and hides what would pass its queue by (local handoff, Atomic
// acquisitions) or what its waiters do not use (Notifier).
func TestFairModelAndCapabilities(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // no I/O below
	defer rdb.Close()
	f, err := redisstore.NewFair(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.WaiterLease() != redisstore.DefaultWaiterLease {
		t.Errorf("WaiterLease = %v, want %v", f.WaiterLease(), redisstore.DefaultWaiterLease)
	}
	want := driver.Model{MinTTL: 10 * time.Millisecond, Granularity: time.Millisecond, ServerClock: true}
	if m := f.Model(); m != want {
		t.Errorf("Model = %+v, want %+v", m, want)
	}
	var m driver.Mutex = f
	for name, want := range map[string]bool{
		"Queuer":         has[driver.Queuer](m),
		"BatchExtender":  has[driver.BatchExtender](m),
		"Inspector":      has[driver.Inspector](m),
		"Lister":         has[driver.Lister](m),
		"WaiterCounter":  has[driver.WaiterCounter](m),
		"Doctor":         has[driver.Doctor](m),
		"no Transferer":  !has[driver.Transferer](m),
		"no Atomic":      !has[driver.Atomic](m),
		"no QueueReader": !has[driver.QueueReader](m),
		"no Notifier":    !has[driver.Notifier](m),
		"no Semaphore":   !has[driver.Semaphore](m),
	} {
		if !want {
			t.Errorf("fair store: %s does not hold", name)
		}
	}
}

// TestFairOptionsRefused: Options.Fair belongs to NewFair (New refuses it),
// and a waiter lease below MinWaiterLease is refused; both before any I/O.
func TestFairOptionsRefused(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if _, err := redisstore.New(rdb, &redisstore.Options{Fair: true}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("New with Fair = %v, want ErrInvalid", err)
	}
	for _, d := range []time.Duration{-time.Second, redisstore.MinWaiterLease - 1} {
		if _, err := redisstore.NewFair(rdb, &redisstore.Options{WaiterLease: d}); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("NewFair with WaiterLease %v = %v, want ErrInvalid", d, err)
		}
	}
}

func has[T any](m driver.Mutex) bool { _, ok := driver.As[T](m); return ok }
