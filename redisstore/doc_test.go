package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// TestBadKeysRefusedBeforeIO pins the doc's promise that every method that
// takes a key refuses one that dlock.ValidateKey refuses, or that starts
// with '}', with driver.ErrInvalid before any I/O: the client points at a
// closed port, so any I/O would fail with a dial error instead. The control
// (a valid key) shows that a call that does reach the network fails
// otherwise.
func TestBadKeysRefusedBeforeIO(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := func(key string) map[string]error {
		_, acq := s.Acquire(ctx, key, "t", time.Second)
		_, ext := s.Extend(ctx, key, "t", time.Second)
		_, tr := s.Transfer(ctx, key, "t", "u", time.Second)
		_, _, sub := s.Subscribe(ctx, key)
		_, ins := s.Inspect(ctx, key)
		_, wai := s.Waiters(ctx, key)
		_, call := s.AcquireCall(ctx, key, "t", time.Second, "c1")
		_, _, app := s.Apply(ctx, driver.Step{Action: driver.Acquire, Key: key, Token: "t", TTL: time.Second, Read: "r"})
		res := s.ExtendBatch(ctx, []driver.ExtendRequest{{Key: key, Token: "t", TTL: time.Second}})
		_, rd := s.AcquireRead(ctx, key, "t", time.Second)
		_, wr := s.AcquireWrite(ctx, key, "t", time.Second)
		_, erw := s.ExtendRW(ctx, key, "t", time.Second)
		_, _, srw := s.SubscribeRW(ctx, key)
		_, irw := s.InspectRW(ctx, key)
		return map[string]error{
			"AcquireRead": rd, "AcquireWrite": wr, "ExtendRW": erw, "ReleaseRW": s.ReleaseRW(ctx, key, "t"),
			"SubscribeRW": srw, "InspectRW": irw,
			"Acquire": acq, "Extend": ext, "Release": s.Release(ctx, key, "t"), "Transfer": tr,
			"Subscribe": sub, "Inspect": ins, "Waiters": wai, "AcquireCall": call, "Apply": app,
			"ExtendBatch": res[0].Err,
		}
	}
	for _, key := range []string{"", "}k", "k\xff"} {
		for name, err := range calls(key) {
			if !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("%s(%q) = %v, want ErrInvalid before any I/O", name, key, err)
			}
		}
	}
	for name, err := range calls("k") { // control: these reach for the network
		if err == nil || errors.Is(err, driver.ErrInvalid) {
			t.Errorf("control %s(\"k\") = %v, want a connection error", name, err)
		}
	}
}

// TestFairBadKeysRefusedBeforeIO: the same promise for the fair store's
// methods, with the same control.
func TestFairBadKeysRefusedBeforeIO(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	f, err := redisstore.NewFair(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := func(key string) map[string]error {
		_, acq := f.Acquire(ctx, key, "t", time.Second)
		_, que := f.AcquireQueued(ctx, key, "t", time.Second)
		_, ext := f.Extend(ctx, key, "t", time.Second)
		_, ins := f.Inspect(ctx, key)
		_, wai := f.Waiters(ctx, key)
		return map[string]error{"Acquire": acq, "AcquireQueued": que, "Extend": ext,
			"Release": f.Release(ctx, key, "t"), "Inspect": ins, "Waiters": wai}
	}
	for _, key := range []string{"", "}k", "k\xff"} {
		for name, err := range calls(key) {
			if !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("%s(%q) = %v, want ErrInvalid before any I/O", name, key, err)
			}
		}
	}
	for name, err := range calls("k") {
		if err == nil || errors.Is(err, driver.ErrInvalid) {
			t.Errorf("control %s(\"k\") = %v, want a connection error", name, err)
		}
	}
}
