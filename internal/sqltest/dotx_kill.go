package sqltest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"example.com/dlock"
)

// The executor's environment (see RunExecutor).
const (
	envTable = "DLOCK_SQLTEST_TABLE"
	envMode  = "DLOCK_SQLTEST_MODE"  // "Folded" or "TwoStep"
	envWhere = "DLOCK_SQLTEST_WHERE" // "tx", or "outside": the charge through the pool
	envLease = "DLOCK_SQLTEST_LEASE"
)

// killKey is the executor's idempotency key and order.
const killKey = "order-3"

// RunExecutor is the executor role of KilledBeforeCommit, for the test
// binary's child: it opens an instance on the table its environment names
// (open: the backend's, on the server the environment names) with a lease
// renewed (WithAutoRenew), charges killKey inside DoTx's transaction (or
// outside it), says "charged <fence>" and waits for a line on stdin,
// which never comes: it is killed there, before its commit.
func RunExecutor(open func(table string, opts ...dlock.Option) (Guard, error)) error {
	lease, err := time.ParseDuration(os.Getenv(envLease))
	if err != nil {
		return err
	}
	g, err := open(os.Getenv(envTable), dlock.WithAutoRenew(lease))
	if err != nil {
		return err
	}
	mode := map[string]Mode{"Folded": Folded, "TwoStep": TwoStep}[os.Getenv(envMode)]
	_, err = g.DoTx(context.Background(), killKey, "fp", mode, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
		if os.Getenv(envWhere) == "outside" {
			tx = g.Outside()
		}
		if err := tx.Charge(ctx, killKey, e.Fence); err != nil {
			return nil, err
		}
		fmt.Println("charged", e.Fence)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // killed here
		return []byte("child"), nil
	})
	return fmt.Errorf("DoTx returned: %v", err)
}

// killLease is the executor's lease in KilledBeforeCommit.
const killLease = 3 * time.Second

// KilledBeforeCommit: the executor, a child process, charges inside DoTx
// and is killed (SIGKILL) after its charge, before its commit; a retry
// waiting on the record (WithWait) then charges and commits. Folded: one
// business row, the retry's, and the retry runs at once: the server rolled
// the dead executor's transaction back, no record was left to take over;
// it must be done within a third of the executor's 3 s lease (it takes
// milliseconds). Controls: the child charging outside the transaction
// leaves its row behind (two rows); in the two-step mode the retry must
// wait for the committed record's lease (at least two thirds of it, renewed
// every third), then takes over: one row, later.
func KilledBeforeCommit(t *testing.T, b Backend) {
	for _, c := range []struct {
		name, where string
		mode        Mode
	}{{"Folded", "tx", Folded}, {"ControlOutsideTheTransaction", "outside", Folded}, {"ControlTwoStepWaitsTheLease", "tx", TwoStep}} {
		t.Run(c.name, func(t *testing.T) {
			table := b.Table(t)
			child := b.StartExecutor(t, ctx(t), envTable+"="+table, envMode+"="+c.mode.String(), envWhere+"="+c.where, envLease+"="+killLease.String())
			child.Value("charged")
			child.Signal(syscall.SIGKILL)
			_ = child.Wait()
			killed := time.Now()

			g := b.Guard(t, table, Sound, dlock.WithWait(20*time.Second))
			var took bool
			r, err := g.DoTx(ctx(t), killKey, "fp", c.mode, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
				took = e.TookOver
				return []byte("retry"), tx.Charge(ctx, killKey, e.Fence)
			})
			after := time.Since(killed)
			n := g.Charges(t, killKey)
			t.Logf("%s: the retry done %v after the kill (lease %v), took over %v; %d business rows", c.name, after.Round(time.Millisecond), killLease, took, n)
			if err != nil || string(r.Value) != "retry" {
				t.Fatalf("the retry: %+v, %v; want its own result", r, err)
			}
			switch {
			case c.where == "outside":
				if n != 2 {
					t.Fatalf("control: %d business rows, want 2 (the killed executor's charge outside the transaction stays)", n)
				}
			case n != 1:
				t.Fatalf("%d business rows after a kill and a retry, want 1", n)
			case c.mode == Folded && (took || after >= killLease/3):
				t.Fatalf("folded: the retry took over %v and was done %v after the kill; want a fresh run within %v (nothing to wait for)", took, after, killLease/3)
			case c.mode == TwoStep && (!took || after < killLease*2/3):
				t.Fatalf("control: the two-step retry took over %v after %v; want a takeover after at least %v of the lease", took, after, killLease*2/3)
			}
		})
	}
}

// errRan is the error of a function that must not run.
var errRan = errors.New("sqltest: the function ran")
