package faulttest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
)

// The SQL stores' stopped-holder protocol (TestFaultHolderStopped). The
// lease child acquires, says "fence <n>", is stopped past its lease, and
// on "write" makes its fenced write and an unfenced one (the control) and
// says how many rows each changed: "fenced <n>", "unfenced <n>". The
// row-lock child writes in its locked transaction, says "locked", is
// stopped, and on "commit" commits and says "commit ok" or "commit failed:
// <why>", then writes outside any transaction (the control) and says
// "outside <n>".

// StaleLeaseWriter is the lease child's part once it holds the lease with
// fence: it says the fence, waits for the parent's line, then runs fenced
// and unfenced and says how many rows each changed.
func StaleLeaseWriter(fence uint64, fenced, unfenced func() (int64, error)) error {
	fmt.Println("fence", fence)
	if _, err := ReadLine(); err != nil {
		return err
	}
	for _, w := range []struct {
		word string
		fn   func() (int64, error)
	}{{"fenced", fenced}, {"unfenced", unfenced}} {
		n, err := w.fn()
		if err != nil {
			return fmt.Errorf("%s write: %w", w.word, err)
		}
		fmt.Println(w.word, n)
	}
	return nil
}

// StaleLeaseWrite is the parent's part: it resumes the stopped lease child
// with "write" and fails the test unless the fenced write changed no row
// (rejected) and the unfenced one, the control, one row, and the child
// then exits cleanly.
func StaleLeaseWrite(c *Child) {
	c.t.Helper()
	c.Resume("write")
	if got := c.Read("fenced"); got != "0" {
		c.t.Fatalf("the stopped holder's fenced write changed %s rows, want 0 (rejected)", got)
	}
	if got := c.Read("unfenced"); got != "1" {
		c.t.Fatalf("control: the unfenced write changed %s rows, want 1", got)
	}
	if err := c.Wait(); err != nil {
		c.t.Fatal(err)
	}
}

// Locked is the row-lock child's part inside its transaction, after its
// write: it says "locked" and waits for the parent's line.
func Locked() error {
	fmt.Println("locked")
	_, err := ReadLine()
	return err
}

// StaleCommitter is the row-lock child's part after its transaction
// ended with commitErr: it says how the commit went, then runs outside
// (the control) and says how many rows it changed.
func StaleCommitter(commitErr error, outside func() (int64, error)) error {
	if commitErr == nil {
		fmt.Println("commit ok")
	} else {
		fmt.Println("commit failed:", strings.ReplaceAll(commitErr.Error(), "\n", " "))
	}
	n, err := outside()
	if err != nil {
		return fmt.Errorf("outside write: %w", err)
	}
	fmt.Println("outside", n)
	return nil
}

// StaleCommit is the parent's part: it resumes the stopped row-lock child
// with "commit", waits for it to exit cleanly (the test fails otherwise)
// and returns what it said of its commit ("ok" or "failed: <why>") and
// the rows its write outside the transaction changed.
func StaleCommit(c *Child) (commit, outside string) {
	c.t.Helper()
	c.Resume("commit")
	commit = c.Read("commit")
	outside = c.Read("outside")
	if err := c.Wait(); err != nil {
		c.t.Fatal(err)
	}
	return commit, outside
}

// PausedHolder is the session stores' paused-holder test (etcdstore,
// zkstore): the holder, a child process, is SIGSTOPped past its session
// while another Client takes the key and writes the fenced resource; then
// the holder is continued and makes its stale write.
type PausedHolder struct {
	// Child is started on a role that locks Key, says "HELD <fence>",
	// waits for a line, makes its write and says "WRITE <landed>".
	Child *Child
	Next  *dlock.Client // the next holder's Client
	Key   string
	Wait  time.Duration // how long the next holder may wait for the key
	// Write is the next holder's fenced write with its fence; the test
	// fails if it does not land (false or an error).
	Write func(fence uint64) (bool, error)
	// Value reads the resource's value after the stale write.
	Value func() (string, error)
}

// PausedResult is what PausedHolder.Run saw.
type PausedResult struct {
	OldFence, NewFence uint64
	GrantedAfter       time.Duration // from the stop to the next holder's grant
	Landed             bool          // the stale write landed, said the holder
	Value              string        // the resource's value at the end
}

// Run stops the holder, has Next take Key (the test fails unless it gets
// it with a greater fence within Wait) and write, resumes the holder for
// its stale write and returns what happened; the next holder's lease is
// released when the test ends. The caller judges Landed and Value.
func (p PausedHolder) Run(t testing.TB, ctx context.Context) PausedResult {
	t.Helper()
	var r PausedResult
	var stoppedAt time.Time
	r.OldFence, stoppedAt = p.Child.StopHolder("HELD")
	l, err := p.Next.Lock(ctx, p.Key, dlock.WithWait(p.Wait))
	if err != nil {
		t.Fatalf("next holder: %v", err)
	}
	r.GrantedAfter, r.NewFence = time.Since(stoppedAt), l.Fence()
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	if r.NewFence <= r.OldFence {
		t.Fatalf("next holder's fence %d not greater than the stopped holder's %d", r.NewFence, r.OldFence)
	}
	if ok, err := p.Write(r.NewFence); !ok || err != nil {
		t.Fatalf("the next holder's fenced write: %v %v", ok, err)
	}
	p.Child.Resume("GO")
	r.Landed = p.Child.Value("WRITE") == "true"
	if r.Value, err = p.Value(); err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT stopped holder's fence %d, next holder's %d granted %v after the stop; stale write landed=%v; resource %q",
		r.OldFence, r.NewFence, r.GrantedAfter.Round(time.Millisecond), r.Landed, r.Value)
	return r
}
