package redisstore_test

import (
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
		t.Error("a Queuer: Redis has no queue of its own")
	}
}

func has[T any](m driver.Mutex) bool { _, ok := driver.As[T](m); return ok }
