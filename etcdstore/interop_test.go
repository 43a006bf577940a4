package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faulttest"
)

// section is a read-modify-write of a counter file, with an overlap check
// (mkdir of a marker fails if another section is inside).
type section struct{ dir string }

func (s section) counter() string { return filepath.Join(s.dir, "counter") }
func (s section) marker() string  { return filepath.Join(s.dir, "inside") }
func (s section) errs() string    { return filepath.Join(s.dir, "overlaps") }

// shell is the section as etcdctl runs it.
func (s section) shell() string {
	return fmt.Sprintf(`mkdir %[1]q 2>/dev/null || echo overlap >> %[3]q; n=$(cat %[2]q); sleep 0.02; echo $((n+1)) > %[2]q; rmdir %[1]q 2>/dev/null; true`,
		s.marker(), s.counter(), s.errs())
}

// run is the same section in Go; it reports whether it overlapped.
func (s section) run() (overlap bool, err error) {
	if err := os.Mkdir(s.marker(), 0o700); err != nil {
		overlap = true
		_ = appendFile(s.errs(), "overlap\n")
	}
	b, err := os.ReadFile(s.counter())
	if err != nil {
		return overlap, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil { // a torn read: the other side is writing it
		_ = appendFile(s.errs(), "overlap (torn read)\n")
		_ = os.Remove(s.marker())
		return true, nil
	}
	time.Sleep(20 * time.Millisecond) // the critical section's work
	if err := os.WriteFile(s.counter(), []byte(strconv.Itoa(n+1)+"\n"), 0o600); err != nil {
		return overlap, err
	}
	_ = os.Remove(s.marker())
	return overlap, nil
}

func appendFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}

func (s section) count(t *testing.T) (counter, overlaps int) {
	b, err := os.ReadFile(s.counter())
	if err != nil {
		t.Fatal(err)
	}
	counter, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	if e, err := os.ReadFile(s.errs()); err == nil {
		overlaps = strings.Count(string(e), "overlap")
	}
	return counter, overlaps
}

// etcdctlLoop runs `etcdctl lock name -- sh -c section` rounds times, one
// process after another, and returns the first error.
func etcdctlLoop(ctx context.Context, bin, endpoint, name string, sec section, rounds int) error {
	for i := range rounds {
		cmd := exec.CommandContext(ctx, bin, "--endpoints="+endpoint, "lock", name, "--", "sh", "-c", sec.shell())
		cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("etcdctl round %d: %w: %s", i, err, out)
		}
	}
	return nil
}

// A dlock Client on this store and `etcdctl lock` on the same name exclude
// each other: no lost update of a shared counter over many rounds, no
// overlap, and each side waited for the other. Negative control: the same
// traffic with the dlock side not locking overlaps.
func TestEtcdctlInterop(t *testing.T) {
	bin := etcdtest.Etcdctl(t)
	c := node(t)
	const rounds = 25
	for _, locked := range []bool{true, false} {
		t.Run(fmt.Sprintf("locked=%v", locked), func(t *testing.T) {
			r := interopRun(t, bin, c.Members[0].ClientURL, locked, rounds)
			t.Logf("counter %d after %d etcdctl + %d dlock rounds; %d overlaps; dlock waited %d times, saw etcdctl waiting %d times",
				r.counter, rounds, r.dlockRounds, r.overlaps, r.dlockWaited, r.etcdctlWaited)
			if !locked {
				if r.overlaps == 0 {
					t.Fatal("negative control: no overlap without the lock; the test cannot see one")
				}
				return
			}
			if r.counter != rounds+r.dlockRounds || r.overlaps != 0 {
				t.Fatalf("counter %d, want %d; %d overlaps", r.counter, rounds+r.dlockRounds, r.overlaps)
			}
			if r.dlockWaited == 0 || r.etcdctlWaited == 0 {
				t.Fatalf("the two sides did not both wait: dlock waited %d times, etcdctl seen waiting %d times", r.dlockWaited, r.etcdctlWaited)
			}
		})
	}
}

type interopResult struct {
	counter, overlaps, dlockRounds, etcdctlWaited int
	dlockWaited                                   int64
}

// interopRun runs the etcdctl loop and, beside it, rounds dlock sections
// (locked) or unlocked sections until etcdctl is done (the control).
func interopRun(t *testing.T, bin, endpoint string, locked bool, rounds int) interopResult {
	pfx := uniq(t)
	s, _ := newStore(t, node(t), pfx, 0)
	sec := section{dir: t.TempDir()}
	if err := os.WriteFile(sec.counter(), []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 90*time.Second)
	// dlock waited for etcdctl when the key was held as Do began (by
	// etcdctl: the only other user) and the holding Do got is a later one.
	var waited atomic.Int64
	dc, err := dlock.New(s, dlock.WithAutoRenew(s.SessionTTL()))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	done := make(chan error, 1)
	var finished atomic.Bool
	go func() {
		done <- etcdctlLoop(ctx, bin, endpoint, pfx+"ctr", sec, rounds)
		finished.Store(true)
	}()
	var r interopResult
	// The control runs until etcdctl is done, to give overlaps a chance.
	for i := 0; (locked && i < rounds) || (!locked && !finished.Load() && i < 20*rounds); i++ {
		if locked {
			var heldFence uint64
			if info, err := s.Inspect(ctx, "ctr"); err == nil && info.Held {
				heldFence = info.Fence
			}
			err = dc.Do(ctx, "ctr", func(ctx context.Context) error {
				if l, ok := dlock.LeaseFromContext(ctx); ok && heldFence > 0 && l.Fence() > heldFence {
					waited.Add(1)
				}
				if i == 0 { // hold the lock until an etcdctl queues behind it
					waitFor(t, 20*time.Second, "etcdctl queued", func() bool { return waiters(t, s, "ctr") > 0 })
				}
				if n, err := s.Waiters(ctx, "ctr"); err == nil && n > 0 {
					r.etcdctlWaited++
				}
				_, err := sec.run()
				return err
			})
		} else {
			_, err = sec.run()
		}
		if err != nil {
			t.Fatal(err)
		}
		r.dlockRounds++
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.counter, r.overlaps = sec.count(t)
	r.dlockWaited = waited.Load()
	return r
}
