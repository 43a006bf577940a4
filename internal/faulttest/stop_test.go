package faulttest_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/faulttest"
)

// lease-writer holds fence 7; its fenced write changes FAULTTEST_FENCED
// rows, its unfenced one 1.
var _ = roles.Register("lease-writer", func() error {
	n, err := strconv.ParseInt(os.Getenv("FAULTTEST_FENCED"), 10, 64)
	if err != nil {
		return err
	}
	return faulttest.StaleLeaseWriter(7,
		func() (int64, error) { return n, nil },
		func() (int64, error) { return 1, nil })
})

// row-locker's commit fails; its write outside changes 1 row.
var _ = roles.Register("row-locker", func() error {
	if err := faulttest.Locked(); err != nil {
		return err
	}
	return faulttest.StaleCommitter(errors.New("killed\nby the server"), func() (int64, error) { return 1, nil })
})

// TestStaleLeaseWrite: a rejected fenced write and a landed control pass;
// a fenced write that landed (run in a test binary of its own, whose
// failure is the expected outcome) fails.
func TestStaleLeaseWrite(t *testing.T) {
	fenced := os.Getenv("FAULTTEST_INNER_FENCED")
	if fenced == "" {
		fenced = "0"
	}
	c := roles.Start(t, t.Context(), "lease-writer", "FAULTTEST_FENCED="+fenced)
	if fence, _ := c.StopHolder("fence"); fence != 7 {
		t.Fatalf("fence %d, want 7", fence)
	}
	faulttest.StaleLeaseWrite(c)
	if os.Getenv("FAULTTEST_INNER_FENCED") != "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := roles.Command(ctx, "", "FAULTTEST_INNER_FENCED=1")
	cmd.Args = []string{os.Args[0], "-test.run=^TestStaleLeaseWrite$"}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "fenced write changed 1 rows, want 0 (rejected)") {
		t.Fatalf("control: a landed fenced write: %v\n%s", err, out)
	}
}

// TestStaleCommit: the child's commit outcome (on one line) and its
// outside write are returned.
func TestStaleCommit(t *testing.T) {
	c := roles.Start(t, t.Context(), "row-locker")
	c.Read("locked")
	c.Signal(syscall.SIGSTOP)
	commit, outside := faulttest.StaleCommit(c)
	if commit != "failed: killed by the server" || outside != "1" {
		t.Fatalf("commit %q, outside %q", commit, outside)
	}
}
