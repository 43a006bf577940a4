package memstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// fakeNow is a clock the test advances by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeNow) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestDocumentedErrors pins what the doc comments promise on failure: a done
// ctx returns ctx's error itself and changes nothing; NotHeld's causes; the
// steps Apply and Transfer refuse with ErrInvalid, changing nothing.
func TestDocumentedErrors(t *testing.T) {
	bg := context.Background()
	done, cancel := context.WithCancel(bg)
	cancel()
	clk := &fakeNow{t: time.Unix(1000, 0)}
	s := memstore.New(clk.now)
	s.Set("res", "v0")
	if _, err := s.Acquire(bg, "held", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Inspect(bg, "held")

	ctxCalls := map[string]func() error{
		"Acquire free": func() error { _, err := s.Acquire(done, "free", "a", time.Minute); return err },
		"Acquire held": func() error { _, err := s.Acquire(done, "held", "a", time.Minute); return err },
		"Extend":       func() error { _, err := s.Extend(done, "held", "a", time.Hour); return err },
		"Release":      func() error { return s.Release(done, "held", "a") },
		"Transfer":     func() error { _, err := s.Transfer(done, "held", "a", "b", time.Minute); return err },
		"Subscribe":    func() error { _, _, err := s.Subscribe(done, "held"); return err },
		"Inspect":      func() error { _, err := s.Inspect(done, "held"); return err },
		"KeyState":     func() error { _, err := s.KeyState(done, "held"); return err },
		"AcquireRead":  func() error { _, err := s.AcquireRead(done, "held", "a", time.Minute); return err },
		"AcquireWrite": func() error { _, err := s.AcquireWrite(done, "held", "a", time.Minute); return err },
		"ExtendRW":     func() error { _, err := s.ExtendRW(done, "held", "a", time.Minute); return err },
		"ReleaseRW":    func() error { return s.ReleaseRW(done, "held", "a") },
		"SubscribeRW":  func() error { _, _, err := s.SubscribeRW(done, "held"); return err },
		"InspectRW":    func() error { _, err := s.InspectRW(done, "held"); return err },
		"Apply": func() error {
			_, _, err := s.Apply(done, driver.Step{Action: driver.Release, Key: "held", Token: "a", Write: &driver.Write{Resource: "res", Value: "x"}})
			return err
		},
	}
	for name, call := range ctxCalls {
		if err := call(); err != context.Canceled {
			t.Errorf("%s with a done ctx = %v, want context.Canceled itself", name, err)
		}
	}
	if after, _ := s.Inspect(bg, "held"); after != before {
		t.Errorf("calls with a done ctx changed the holding: %+v, then %+v", before, after)
	}
	if info, _ := s.Inspect(bg, "free"); info.Held {
		t.Error("Acquire with a done ctx took the key")
	}
	if v, _ := s.Get("res"); v != "v0" {
		t.Errorf("Apply with a done ctx wrote %q", v)
	}

	notHeld := []struct {
		name  string
		err   error
		cause error
	}{
		{"Extend free", second(s.Extend(bg, "free", "a", time.Minute)), driver.ErrExpired},
		{"Extend taken", second(s.Extend(bg, "held", "b", time.Minute)), driver.ErrTaken},
		{"Release free", s.Release(bg, "free", "a"), driver.ErrExpired},
		{"Release taken", s.Release(bg, "held", "b"), driver.ErrTaken},
		{"Transfer free", second(s.Transfer(bg, "free", "a", "b", time.Minute)), driver.ErrExpired},
		{"Transfer taken", second(s.Transfer(bg, "held", "b", "c", time.Minute)), driver.ErrTaken},
	}
	for _, c := range notHeld {
		if !errors.Is(c.err, driver.ErrNotHeld) || !errors.Is(c.err, c.cause) {
			t.Errorf("%s = %v, want ErrNotHeld and %v", c.name, c.err, c.cause)
		}
	}
	var ce *driver.ContendedError
	if _, err := s.Acquire(bg, "held", "b", time.Minute); !errors.As(err, &ce) || ce.Remaining <= 0 {
		t.Errorf("contended Acquire = %v, want a *ContendedError with the holder's remaining time", err)
	}

	// Refused steps: ErrInvalid, nothing changed (the hold count, the data).
	if _, err := s.Acquire(bg, "held", "a", time.Minute); err != nil { // re-entered: 2 holds
		t.Fatal(err)
	}
	invalid := map[string]func() error{
		"Transfer re-entered": func() error { _, err := s.Transfer(bg, "held", "a", "b", time.Minute); return err },
		"Apply Acquire+Write": func() error {
			_, _, err := s.Apply(bg, driver.Step{Action: driver.Acquire, Key: "held", Token: "a", TTL: time.Minute, Write: &driver.Write{Resource: "res", Value: "x"}})
			return err
		},
		"Apply Release+Read": func() error {
			_, _, err := s.Apply(bg, driver.Step{Action: driver.Release, Key: "held", Token: "a", Read: "res"})
			return err
		},
		"Apply unknown action": func() error {
			_, _, err := s.Apply(bg, driver.Step{Action: 99, Key: "held", Token: "a"})
			return err
		},
	}
	for name, call := range invalid {
		if err := call(); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s = %v, want ErrInvalid", name, err)
		}
	}
	if info, _ := s.Inspect(bg, "held"); info.Holds != 2 || info.Token != "a" {
		t.Errorf("refused steps changed the holding: %+v", info)
	}
	if v, _ := s.Get("res"); v != "v0" {
		t.Errorf("refused steps wrote %q", v)
	}
	// Control: the same Release with a Write, and no Read, is performed.
	if _, _, err := s.Apply(bg, driver.Step{Action: driver.Release, Key: "held", Token: "a", Write: &driver.Write{Resource: "res", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Get("res"); v != "x" {
		t.Errorf("a valid Release+Write step wrote %q, want x", v)
	}
}

// TestSubscribeSendsOnFinalReleaseOnly pins Subscribe's doc: a value for a
// final Release, none for a partial release, an expiry or a Transfer, and a
// cancel that may be called twice.
func TestSubscribeSendsOnFinalReleaseOnly(t *testing.T) {
	bg := context.Background()
	clk := &fakeNow{t: time.Unix(1000, 0)}
	s := memstore.New(clk.now)
	ch, cancel, err := s.Subscribe(bg, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	quiet := func(what string) {
		t.Helper()
		select {
		case <-ch:
			t.Errorf("%s sent a value", what)
		default:
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(second(s.Acquire(bg, "k", "a", time.Second)))
	must(second(s.Acquire(bg, "k", "a", time.Second)))
	must(s.Release(bg, "k", "a"))
	quiet("a partial release")
	must(second(s.Transfer(bg, "k", "a", "b", time.Second)))
	quiet("a Transfer")
	clk.add(2 * time.Second)
	if _, err := s.Acquire(bg, "k", "c", time.Second); err != nil { // b's lease ran out
		t.Fatal(err)
	}
	quiet("an expiry")
	must(s.Release(bg, "k", "c"))
	select {
	case <-ch:
	default:
		t.Error("the final Release sent nothing")
	}
	cancel()
	cancel() // documented: harmless
	if n, err := s.KeyState(bg, "k"); err != nil || n != 0 {
		t.Errorf("after cancel the store keeps %d entries for k (%v), want 0", n, err)
	}
}

func second[T any](_ T, err error) error { return err }
