package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock/driver"
)

// scriptedInspector answers Inspect with infos in turn, the last one again
// once they run out.
type scriptedInspector struct {
	driver.Mutex // nil: reportWait only inspects
	mu           sync.Mutex
	infos        []driver.Info
	calls        int
}

func (s *scriptedInspector) Inspect(context.Context, string) (driver.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.infos)-1)
	s.calls++
	return s.infos[i], nil
}

// TestReportWaitSaysOnlyWhatChanged: the first line at once names the
// holder (fence 5, its lease); polls that see the same holder say nothing;
// a new holder (fence 7) is reported once it is seen twice; a fence seen
// once before the key is free (run's own grant, just before Lock returns)
// is not reported.
func TestReportWaitSaysOnlyWhatChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		held := func(fence uint64) driver.Info {
			return driver.Info{Held: true, Token: "abcdefghijkl", Holds: 1, Remaining: 20 * time.Second, Fence: fence}
		}
		in := &scriptedInspector{infos: []driver.Info{held(5), held(5), held(7), held(7), held(9), {}}}
		var out lockedBuffer
		stop := reportWait(context.Background(), &out, in, "k", "with no end (no --wait given)")
		if got := out.String(); got != "dlock: waiting for lock \"k\": held by abcdef… (fence 5), whose lease runs 20s more unless renewed; trying with no end (no --wait given)\n" {
			t.Fatalf("at once: %q", got)
		}
		time.Sleep(6*waitPollEvery + time.Millisecond)
		synctest.Wait()
		stop()
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[1], `lock "k" changed hands while waiting: held by abcdef… (fence 7)`) {
			t.Fatalf("want the waiting line and one change (fence 7), got:\n%s", out.String())
		}
	})
}
