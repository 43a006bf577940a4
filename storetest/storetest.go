// Package storetest is the conformance suite for driver.Mutex implementations:
// every store in this module runs it, and third-party stores can too.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) driver.Mutex { return newMyStore(t) })
//	}
//
// The suite uses real time with short TTLs (TTL below) and checks the rules
// written on driver.Mutex. Each test uses its own keys, so one store may be
// shared between tests.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TTL is the lease the suite uses for expiry tests; Slack is the scheduling
// allowance added to every time bound.
const (
	TTL   = 150 * time.Millisecond
	Slack = 500 * time.Millisecond
	long  = 10 * time.Second
)

// Run runs the suite against stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) driver.Mutex) {
	tests := []struct {
		name string
		fn   func(*testing.T, driver.Mutex)
	}{
		{"AcquireFreeKey", testAcquireFree},
		{"ContendedReturnsRemaining", testContended},
		{"ReentryCountsHolds", testReentry},
		{"FencesStrictlyIncrease", testFences},
		{"ExtendByOwner", testExtend},
		{"NonOwnerChangesNothing", testNonOwner},
		{"ExpiryFreesKey", testExpiry},
		{"ExpiredHolderCannotTouchNextHolder", testExpiredHolder},
		{"ExtendNeverRecreates", testExtendNoRecreate},
		{"HostileKeysAndTokens", testHostile},
		{"CancelledContext", testCancelled},
		{"NotifiesOnRelease", testNotify},
		{"TransferIsANewHolding", testTransfer},
		{"ReadAndCommitAreOwnerChecked", testReadAndCommit},
		{"TransferReadsAndWrites", testTransferReadAndWrite},
		{"ReentryNeverShortensTheHolding", testReentryNeverShortens},
		{"ExtendShorterShortensTheHolding", testExtendShorterShortens},
		{"NoStateLeftAfterRetention", testBoundedState},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// Key returns a key unique to this test run.
func Key(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return t.Name() + "/" + hex.EncodeToString(b[:])
}

// Token returns a fresh owner token.
func Token() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), long)
	t.Cleanup(cancel)
	return c
}

func mustAcquire(t *testing.T, s driver.Mutex, key, token string, ttl time.Duration) driver.Grant {
	t.Helper()
	g, err := s.Acquire(ctx(t), key, token, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return g
}

func mustRelease(t *testing.T, s driver.Mutex, key, token string) {
	t.Helper()
	if err := s.Release(ctx(t), key, token); err != nil {
		t.Fatalf("Release(%q): %v", key, err)
	}
}

// wantContended asserts that token cannot acquire key because another holds it.
func wantContended(t *testing.T, s driver.Mutex, key string) *driver.ContendedError {
	t.Helper()
	_, err := s.Acquire(ctx(t), key, Token(), long)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("Acquire by another token: got %v, want *ContendedError matching ErrNotAcquired", err)
	}
	return ce
}

func wantNotHeld(t *testing.T, err, cause error) {
	t.Helper()
	if !errors.Is(err, driver.ErrNotHeld) || !errors.Is(err, cause) {
		t.Fatalf("got %v, want ErrNotHeld with cause %v", err, cause)
	}
}

// eventually polls cond every 5 ms until it holds or d elapses.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}
