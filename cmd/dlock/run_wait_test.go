package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/memstore"
)

// L6 (unit, fake clock): the unreachable-store line comes after a second of
// failures, then at most every 10 s; an answer from the store (contention)
// starts a new spell.
func TestL6UnreachableReporterPacing(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Unix(1000, 0)
	now := t0
	r := &unreachableReporter{w: &out, key: "k", until: "until --wait 1m runs out", now: func() time.Time { return now }}
	down := fmt.Errorf("%w: connection refused", dlock.ErrUnavailable)
	held := &driver.ContendedError{Remaining: time.Second}
	steps := []struct {
		at    time.Duration
		err   error
		lines int
	}{
		{0, down, 0},
		{500 * time.Millisecond, down, 0},
		{1100 * time.Millisecond, down, 1},
		{5 * time.Second, down, 1},
		{11 * time.Second, down, 1},
		{11200 * time.Millisecond, down, 2},
		{12 * time.Second, held, 2}, // the store answered
		{12500 * time.Millisecond, down, 2},
		{13600 * time.Millisecond, down, 3},
	}
	for i, s := range steps {
		now = t0.Add(s.at)
		r.retry(i+1, s.err)
		if r.lines != s.lines {
			t.Fatalf("after the failure at %v: %d lines, want %d:\n%s", s.at, r.lines, s.lines, out.String())
		}
	}
	if !strings.Contains(out.String(), "unreachable for 1.1s (store unavailable: connection refused); still trying until --wait 1m runs out") {
		t.Fatalf("line: %q", out.String())
	}
}

// A6 (unit): the CLI's contention text names the remaining lease, rounded,
// and still matches the library's sentinel.
func TestA6NotAcquiredMessageRoundsRemainingLease(t *testing.T) {
	err := fmt.Errorf("%w", &driver.ContendedError{Remaining: 29395717523 * time.Nanosecond})
	got := notAcquiredError(&runFlags{key: "k", wait: 0, waitSet: true}, err)
	if got.Error() != `lock "k" not acquired (--wait 0: a single try): held by another owner (remaining lease 29.4s)` || !errors.Is(got, dlock.ErrNotAcquired) {
		t.Fatalf("got %q", got)
	}
}

// refusingInspector is a store whose Inspect refuses, as redisstore does for
// a value that is not a lock.
type refusingInspector struct{ driver.Mutex }

func (refusingInspector) Inspect(context.Context, string) (driver.Info, error) {
	return driver.Info{}, fmt.Errorf("%w: the key holds a value that is not a lock", dlock.ErrRefused)
}

// A7 (unit): status turns a refused Inspect into ExitRefused naming the key,
// never into "held: no".
func TestA7InspectRefusedIsExitRefused(t *testing.T) {
	_, err := inspect(context.Background(), refusingInspector{memstore.New(nil)}, "weird")
	if usageCode(err) != ExitRefused || !strings.Contains(err.Error(), `key "weird"`) || !errors.Is(err, dlock.ErrRefused) {
		t.Fatalf("got %v (code %d)", err, usageCode(err))
	}
}

// refusingAcquirer is a store whose Acquire refuses, as redisstore does for
// a user lacking EVALSHA (NOPERM).
type refusingAcquirer struct{ driver.Mutex }

func (refusingAcquirer) Acquire(context.Context, string, string, time.Duration) (driver.Grant, error) {
	return driver.Grant{}, fmt.Errorf("%w: NOPERM this user has no permissions to run the 'evalsha' command", dlock.ErrRefused)
}

// L6 (unit): a refusal ends run's unbounded wait at once with ExitRefused
// and the store's reason; the end-to-end version through redis-server is
// TestL6RunRefusedByACLExitsAtOnce.
func TestL6AcquireRefusedExitsRefused(t *testing.T) {
	c, err := dlock.New(refusingAcquirer{memstore.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	var stderr bytes.Buffer
	f := &runFlags{key: "k", lease: dlock.DefaultLease} // no --wait: wait forever
	rep := &unreachableReporter{w: &stderr, key: f.key, until: f.waitHint()}
	done := make(chan error, 1)
	go func() { _, err := acquire(context.Background(), mutexLocker(c), f, time.Now(), rep, nil); done <- err }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a refused acquire is still waiting after 10 s")
	}
	if usageCode(err) != ExitRefused || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("got %v (code %d), want exit %d with the store's reason", err, usageCode(err), ExitRefused)
	}
}

// A6 (unit): the CLI prints an error on one line with one "dlock:" prefix,
// whatever the library stacked or joined.
func TestA6OneLineOnePrefix(t *testing.T) {
	err := errors.Join(fmt.Errorf("dlock: lock \"k\": %w", dlock.ErrNotAcquired), context.DeadlineExceeded)
	if got := unprefixed(err); got != `lock "k": lock not acquired; context deadline exceeded` {
		t.Fatalf("got %q", got)
	}
}

// The "dlock: " prefix is removed as a word only: the Redlock store's
// "redlock: " errors kept their text (an unreachable Redlock majority was
// printed as "store unavailable: reno quorum: ...").
func TestUnprefixedKeepsRedlockPrefix(t *testing.T) {
	err := fmt.Errorf("dlock: store unavailable: %w", errors.New("redlock: no quorum: inspect succeeded on 1 of 3 nodes"))
	want := "store unavailable: redlock: no quorum: inspect succeeded on 1 of 3 nodes"
	if got := unprefixed(err); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := unprefixed(errors.New("dlock: a; dlock: b (dlock: c)")); got != "a; b (c)" {
		t.Fatalf("got %q, want every whole-word prefix removed", got)
	}
}

// plain (the wrapper most exit paths use) removes the prefix the same way
// unprefixed does: it used to replace every "dlock: " in the text, so an
// unreachable Redlock majority read "reno quorum" again, and a database
// named dlock lost its name ("on mysql 127.0.0.1:3306/mysqlstore: …").
func TestPlainKeepsWordsAndNames(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"dlock: store unavailable: redlock: no quorum", "store unavailable: redlock: no quorum"},
		{"schema --apply on mysql 127.0.0.1:3306/dlock: mysqlstore: migrate: denied", "schema --apply on mysql 127.0.0.1:3306/dlock: mysqlstore: migrate: denied"},
		{`lock "k": dlock: lock not acquired (dlock: c)`, `lock "k": lock not acquired (c)`},
	} {
		if got := plain(errors.New(c.in)).Error(); got != c.want {
			t.Errorf("plain(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := unprefixed(plain(errors.New(c.in))); got != c.want {
			t.Errorf("unprefixed(plain(%q)) = %q, want %q", c.in, got, c.want)
		}
	}
	if err := plain(fmt.Errorf("x: %w", dlock.ErrNotAcquired)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("plain(%v) no longer matches its sentinel", err)
	}
}
