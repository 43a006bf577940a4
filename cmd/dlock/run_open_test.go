package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// flakyOpens counts the calls of the flaky-open:// opener (this test binary
// only): like the etcd, ZooKeeper and MySQL openers, which dial, it fails
// with ErrUnavailable while its store is down, here until its Nth call (N
// is the URL's host), and then opens an in-memory store.
var flakyOpens atomic.Int64

func init() {
	driver.Register("flaky-open", func(_ context.Context, u *url.URL) (*driver.Opened, error) {
		n, err := strconv.Atoi(u.Host)
		if err != nil {
			return nil, driver.ErrInvalid
		}
		if flakyOpens.Add(1) < int64(n) {
			return nil, fmt.Errorf("%w: flaky-open: connect: connection refused", driver.ErrUnavailable)
		}
		return &driver.Opened{Store: memstore.New(nil), Close: func() error { return nil }, Describe: "flaky-open"}, nil
	})
}

// TestRunWaitRetriesOpener: `run --wait D` waits within D for a store
// whose opener cannot reach it yet (docs/cli.md: "With --wait D it says so
// ... and keeps trying within D"); it used to say "waiting for it" and
// exit 69 at the opener's first failure. The controls: --wait 0 tries
// once, and a store that stays down ends the wait with 69 when D runs out.
func TestRunWaitRetriesOpener(t *testing.T) {
	flakyOpens.Store(0)
	code, _, stderr := runCLI(t, "run", "--store", "flaky-open://4", "--wait", "30s", "--key", "k", "--", "true")
	if code != 0 || flakyOpens.Load() != 4 || !strings.Contains(stderr, "waiting for it (--wait 30s)") {
		t.Errorf("a store up at the 4th open: exit %d after %d opens, stderr %q; want 0 after 4", code, flakyOpens.Load(), stderr)
	}
	flakyOpens.Store(0)
	code, _, stderr = runCLI(t, "run", "--store", "flaky-open://4", "--wait", "0", "--key", "k", "--", "true")
	if code != ExitUnavailable || flakyOpens.Load() != 1 {
		t.Errorf("--wait 0: exit %d after %d opens, stderr %q; want %d after 1", code, flakyOpens.Load(), stderr, ExitUnavailable)
	}
	flakyOpens.Store(0)
	code, _, stderr = runCLI(t, "run", "--store", "flaky-open://1000000", "--wait", "1s", "--key", "k", "--", "true")
	if code != ExitUnavailable || flakyOpens.Load() < 2 || !strings.Contains(stderr, "stayed unreachable") {
		t.Errorf("a store that stays down: exit %d after %d opens, stderr %q; want %d after several", code, flakyOpens.Load(), stderr, ExitUnavailable)
	}
}
