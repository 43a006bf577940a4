package mysqlstore_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"example.com/dlock/mysqlstore/myguard"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/mysqlstore"
)

// The crash between the business write and the commit: an executor
// process (a re-execution of this test binary, see TestMain) charges
// inside Store.DoTx, says "charged", and is killed (SIGKILL) before its
// transaction commits.

const (
	txChildEnv = "MYSQLSTORE_DOTX_CHILD" // the server's DSN
	txTableEnv = "MYSQLSTORE_DOTX_TABLE"
	txModeEnv  = "MYSQLSTORE_DOTX_MODE" // "tx", or "outside": the charge through the pool (control)
	txLease    = 600 * time.Millisecond
	txKey      = "order-3"
)

// runTxChild is the executor: it charges (in DoTx's transaction, or
// outside it), prints "charged" and waits for stdin, which never answers.
func runTxChild(dsn, table, mode string) int {
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table})
	if err == nil {
		var g *dlock.Guard
		if g, err = dlock.NewGuard(s, time.Hour, dlock.WithAutoRenew(txLease)); err == nil {
			_, err = myguard.DoTx(ctx, s, g, txKey, "fp", func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error) {
				var q execer = tx
				if mode == "outside" {
					q = db
				}
				if err := insertCharge(ctx, q, table, txKey, e.Fence); err != nil {
					return nil, err
				}
				fmt.Println("charged")
				_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // killed here
				return []byte("child"), nil
			})
		}
	}
	fmt.Println("returned:", err)
	return 1
}

// TestDoTxExecutorKilledBeforeCommitChargesOnce: the executor is killed
// after its charge, before its commit; a retry waiting on the record takes
// it over once the lease (600 ms, renewed until the kill) has passed,
// charges and commits: one business row, the retry's. Control: the child
// charging outside the transaction leaves its row behind, and the retry
// makes a second (the kill came after the charge).
func TestDoTxExecutorKilledBeforeCommitChargesOnce(t *testing.T) {
	for _, mode := range []string{"tx", "outside"} {
		name := map[string]string{"tx": "InTheTransaction", "outside": "ControlOutsideTheTransaction"}[mode]
		t.Run(name, func(t *testing.T) {
			table, admin := chargesTable(t)
			c, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(c, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), txChildEnv+"="+shared(t).DSN(), txTableEnv+"="+table, txModeEnv+"="+mode)
			cmd.Stderr = os.Stderr
			stdin, err1 := cmd.StdinPipe()
			stdout, err2 := cmd.StdoutPipe()
			if err := errors.Join(err1, err2, cmd.Start()); err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			line := make(chan string, 1)
			go func() { l, _ := bufio.NewReader(stdout).ReadString('\n'); line <- strings.TrimSpace(l) }()
			select {
			case l := <-line:
				if l != "charged" {
					t.Fatalf("the executor said %q, want charged", l)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the executor did not charge within 30 s")
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			killed := time.Now()

			s, g := txGuard(t, table, dlock.WithWait(20*time.Second))
			var took bool
			r, err := myguard.DoTx(ctxT(t), s, g, txKey, "fp", func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error) {
				took = e.TookOver
				return []byte("retry"), insertCharge(ctx, tx, table, txKey, e.Fence)
			})
			if err != nil || string(r.Value) != "retry" || !took {
				t.Fatalf("the retry: %+v, %v, took over %v; want its own result after a takeover", r, err, took)
			}
			n := charges(t, admin, table, txKey)
			t.Logf("mode %s: taken over %v after the kill (lease %v); %d business rows", mode, time.Since(killed).Round(time.Millisecond), txLease, n)
			switch {
			case mode == "tx" && n != 1:
				t.Fatalf("%d business rows after a crash and a retry, want 1", n)
			case mode == "outside" && n != 2:
				t.Fatalf("control: %d business rows, want 2 (the crashed executor's charge outside the transaction stays)", n)
			}
		})
	}
}
