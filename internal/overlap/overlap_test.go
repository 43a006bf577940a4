package overlap

import (
	"context"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestOverlaps: disjoint windows give nothing; a window starting before
// another ends is reported with both holders (the control: a checker that
// could not fail would report nothing here too).
func TestOverlaps(t *testing.T) {
	var r Recorder
	t0 := time.Now()
	r.Add(Window{Who: "a", From: t0, To: t0.Add(10 * time.Millisecond), Fence: 1})
	r.Add(Window{Who: "b", From: t0.Add(10 * time.Millisecond), To: t0.Add(20 * time.Millisecond), Fence: 2})
	if got := r.Overlaps(); len(got) != 0 {
		t.Fatalf("touching windows overlap: %v", got)
	}
	r.Add(Window{Who: "c", From: t0.Add(15 * time.Millisecond), To: t0.Add(30 * time.Millisecond), Fence: 3})
	got := r.Overlaps()
	if len(got) != 1 || !strings.Contains(got[0], "b [fence 2") || !strings.Contains(got[0], "c [fence 3]") {
		t.Fatalf("Overlaps = %v; want b and c", got)
	}
	if n := len(r.Windows()); n != 3 {
		t.Fatalf("Windows() has %d; want 3", n)
	}
}

// TestFail counts errors by kind, through wrapping.
func TestFail(t *testing.T) {
	var r Recorder
	r.Fail(context.DeadlineExceeded)
	r.Fail(driver.ErrUnavailable)
	r.Fail(driver.ErrNotAcquired)
	r.Fail(driver.ErrInvalid)
	want := map[string]int{"ctx": 1, "unavailable": 1, "not-acquired": 1, "other": 1}
	got := r.Errs()
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("Errs() = %v; want %v", got, want)
		}
	}
}
