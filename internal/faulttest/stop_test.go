package faulttest_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/memstore"
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
	failsAlone(t, "TestStaleLeaseWrite", "FAULTTEST_INNER_FENCED=1", "fenced write changed 1 rows, want 0 (rejected)")
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

// paused-holder claims fence FAULTTEST_HELD, and on GO says its write did
// not land.
var _ = roles.Register("paused-holder", func() error {
	fmt.Println("HELD", os.Getenv("FAULTTEST_HELD"))
	if _, err := faulttest.ReadLine(); err != nil {
		return err
	}
	fmt.Println("WRITE false")
	return nil
})

// TestPausedHolder: Run stops the holder, the next holder (a memstore
// Client here) takes the key and writes, the holder's answer and the value
// are returned. Control (a test binary of its own, whose failure is the
// expected outcome): a next holder whose fence is not greater than the
// stopped holder's fails the test.
func TestPausedHolder(t *testing.T) {
	held := os.Getenv("FAULTTEST_INNER_HELD")
	if held == "" {
		held = "0"
	}
	dc, err := dlock.New(memstore.New(nil), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	var value string
	r := faulttest.PausedHolder{
		Child: roles.Start(t, t.Context(), "paused-holder", "FAULTTEST_HELD="+held),
		Next:  dc, Key: "k", Wait: time.Second,
		Write: func(fence uint64) (bool, error) { value = fmt.Sprint("next ", fence); return true, nil },
		Value: func() (string, error) { return value, nil },
	}.Run(t, t.Context())
	if r.OldFence != 0 || r.NewFence == 0 || r.Landed || r.Value != fmt.Sprint("next ", r.NewFence) || r.GrantedAfter <= 0 {
		t.Fatalf("result %+v", r)
	}
	if os.Getenv("FAULTTEST_INNER_HELD") != "" {
		return
	}
	failsAlone(t, "TestPausedHolder", "FAULTTEST_INNER_HELD=99", "not greater than the stopped holder's 99")
}
