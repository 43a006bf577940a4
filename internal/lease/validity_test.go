package lease

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/fakeclock"
)

// recHolder records the engine's calls.
type recHolder struct {
	v           *Validity[*fakeTimer]
	ended, lost int
}

func (h *recHolder) Expire() { h.v.Expire(h) }

func (h *recHolder) LostError(cause error) error { return fmt.Errorf("lost: %w", cause) }
func (h *recHolder) Ended()                      { h.ended++ }
func (h *recHolder) Lost()                       { h.lost++ }

func newValidity(ttl time.Duration) (*Validity[*fakeTimer], *fakeClock, *recHolder) {
	clk := fakeclock.New(time.Unix(1000, 0))
	v := new(Validity[*fakeTimer])
	h := &recHolder{v: v}
	v.Init(clk, ValidUntil(clk.Now(), ttl, ttl), ttl, h)
	return v, clk, h
}

// The expiry timer loses the lease the margin before the end of its
// validity, once: Done closes, the hooks run with the loss error, which
// matches driver.ErrExpired; a release afterwards is told to give the hold
// back once.
func TestValidityExpiresAtTheMargin(t *testing.T) {
	const ttl = time.Second
	v, clk, h := newValidity(ttl)
	var hooked error
	v.OnLost(func(err error) { hooked = err })
	until := v.ValidUntil()
	clk.Advance(until.Sub(clk.Now()) - Margin(ttl) - time.Nanosecond)
	if err := v.Err(h); err != nil || h.ended != 0 {
		t.Fatalf("before the margin: %v, ended %d", err, h.ended)
	}
	clk.Advance(time.Nanosecond)
	select {
	case <-v.Done():
	default:
		t.Fatal("Done not closed at the margin")
	}
	if !errors.Is(hooked, driver.ErrExpired) || h.ended != 1 || h.lost != 1 {
		t.Fatalf("hook got %v; ended %d, lost %d", hooked, h.ended, h.lost)
	}
	if err, first, _ := v.Release(h); !errors.Is(err, driver.ErrExpired) || !first {
		t.Fatalf("first release after the loss: %v, first %v", err, first)
	}
	if _, first, _ := v.Release(h); first {
		t.Fatal("second release after the loss also told to give the hold back")
	}
}

// A successful Settle sets the validity outright (earlier too); a failed
// one only ever cuts it; "not held" loses the lease; a released lease
// never runs loss hooks.
func TestValiditySettle(t *testing.T) {
	const ttl = time.Second
	v, clk, h := newValidity(ttl)
	start := clk.Now()
	if _, _, ok := v.TryBeginCall(); !ok {
		t.Fatal("TryBeginCall refused on a fresh lease")
	}
	if _, _, ok := v.TryBeginCall(); ok {
		t.Fatal("two calls under way at once")
	}
	if err := v.Settle(h, start, 2*time.Second, 2*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := v.ValidUntil(), ValidUntil(start, 2*time.Second, 2*time.Second); !got.Equal(want) {
		t.Fatalf("after success: %v, want %v", got, want)
	}
	_, _, _ = v.TryBeginCall()
	before := v.ValidUntil()
	if err := v.Settle(h, start, 5*time.Second, 0, driver.ErrUnavailable); !errors.Is(err, driver.ErrUnavailable) || !v.ValidUntil().Equal(before) {
		t.Fatalf("failed longer call: %v, validity moved %v", err, v.ValidUntil().Sub(before))
	}
	_, _, _ = v.TryBeginCall()
	if err := v.Settle(h, start, 100*time.Millisecond, 0, driver.ErrUnavailable); err == nil || !v.ValidUntil().Before(before) {
		t.Fatalf("failed shorter call: %v, validity not cut", err)
	}
	_, _, _ = v.TryBeginCall()
	if err := v.Settle(h, start, ttl, 0, driver.NotHeld(true)); !errors.Is(err, driver.ErrTaken) || h.lost != 1 {
		t.Fatalf("not held: %v, lost %d", err, h.lost)
	}

	r, _, rh := newValidity(ttl)
	ran := false
	r.OnLost(func(error) { ran = true })
	if err, _, _ := r.Release(rh); err != nil {
		t.Fatal(err)
	}
	if err := r.Lose(rh, driver.ErrExpired); err != Released || ran || rh.ended != 1 {
		t.Fatalf("lose after release: %v, hook ran %v, ended %d", err, ran, rh.ended)
	}
}
