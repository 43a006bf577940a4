package main

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// modelOnly is a store that offers no lock (no driver.Mutex): a store of
// another primitive, as the CLI sees it.
type modelOnly struct{}

func (modelOnly) Model() driver.Model { return driver.Model{} }

func init() {
	driver.Register("nolock", func(_ context.Context, u *url.URL) (*driver.Opened, error) {
		var s driver.Store = modelOnly{}
		if u.Host == "mutex" {
			s = memstore.New(nil)
		}
		return &driver.Opened{Store: s, Close: func() error { return nil }, Describe: "nolock " + u.Host}, nil
	})
}

// TestStoreWithoutLockIsUsageError: a store URL whose store offers no
// driver.Mutex exits with ExitUsage and says so, without running the
// child; the control opens a Mutex through the same scheme and runs it.
func TestStoreWithoutLockIsUsageError(t *testing.T) {
	code, _, stderr := runCLI(t, "run", "--store", "nolock://bare", "--key", "k", "--", "true")
	if code != ExitUsage || !strings.Contains(stderr, "offers no lock") {
		t.Errorf("no Mutex: code %d, stderr %q; want %d, \"offers no lock\"", code, stderr, ExitUsage)
	}
	if code, _, stderr := runCLI(t, "run", "--store", "nolock://mutex", "--key", "k", "--", "true"); code != 0 { // control
		t.Errorf("a Mutex: code %d, stderr %q; want 0", code, stderr)
	}
}
