package zkstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/zkserver"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// The holder runs in a child process (this test binary again, its role
// chosen by ZKSTORE_FAULT_CHILD before any test starts), so that SIGSTOP
// freezes it whole: its session's pings, its renewal, its work.
var roles = faulttest.NewRoles("ZKSTORE_FAULT_CHILD")

func init() { roles.Run() }

// holderChild locks "k" on the ensemble in ZKSTORE_FAULT_ADDRS under
// ZKSTORE_FAULT_ROOT, says "HELD <fence>", then waits for a line on stdin
// and writes the fenced resource ZKSTORE_FAULT_RES with its fence (or
// without the fence check: ZKSTORE_FAULT_MODE=unfenced, the bug fencing
// prevents), retrying through the connection's recovery (retryWrite: a
// raw "broken pipe" after SIGCONT is a connection loss, zkstore.ConnLoss).
// It says "WRITE <landed>" and exits.
var _ = roles.Register("holder", func() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := zkstore.Dial(ctx, strings.Split(os.Getenv("ZKSTORE_FAULT_ADDRS"), ","),
		zkstore.Options{Root: os.Getenv("ZKSTORE_FAULT_ROOT"), SessionTimeout: faultTimeout})
	if err != nil {
		return err
	}
	defer s.Close()
	conn := s.Conn()
	dc, err := dlock.New(s, dlock.WithAutoRenew(faultTimeout))
	if err != nil {
		return err
	}
	l, err := dc.Lock(ctx, "k")
	if err != nil {
		return err
	}
	fmt.Println("HELD", l.Fence())
	if _, err := faulttest.ReadLine(); err != nil {
		return err
	}
	landed, err := retryWrite(conn, os.Getenv("ZKSTORE_FAULT_RES"), l.Fence(), "stale holder",
		os.Getenv("ZKSTORE_FAULT_MODE") == "unfenced")
	if err != nil {
		return err
	}
	fmt.Println("WRITE", landed)
	return nil
})

// The holder process is SIGSTOPped past its session timeout (3 s) on a
// 3-server ensemble. Invariants: another Client gets the key once the
// stopped holder's session expired, with a greater fence; the stopped
// holder, resumed, has its fenced write rejected by the fenced resource,
// which keeps the new holder's value. Negative control (unfenced): the
// same write without the fence check lands over the new holder's value.
func TestPausedHolderFencedWriteRejected(t *testing.T) {
	e := zkserver.StartEnsemble(t, 3)
	for _, mode := range []string{"fenced", "unfenced"} {
		t.Run(mode, func(t *testing.T) { pausedHolder(t, e.Addrs(), mode) })
	}
}

func pausedHolder(t *testing.T, addrs []string, mode string) {
	root := testPath(t)
	res := root + "-resource"
	ctx := testCtx(t, 90*time.Second)
	s, conn := newFaultStore(t, addrs, root, faultTimeout)
	if _, err := conn.Create(res, []byte("0 initial"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	h := roles.Start(t, ctx, "holder", "ZKSTORE_FAULT_ADDRS="+strings.Join(addrs, ","),
		"ZKSTORE_FAULT_ROOT="+root, "ZKSTORE_FAULT_RES="+res, "ZKSTORE_FAULT_MODE="+mode)
	r := faulttest.PausedHolder{Child: h, Next: newFaultClient(t, s, faultTimeout), Key: "k", Wait: 4 * faultTimeout,
		Write: func(fence uint64) (bool, error) { return fencedWrite(conn, res, fence, "next holder", false) },
		Value: func() (string, error) { return resourceValue(t, conn, res), nil },
	}.Run(t, ctx)
	landed, value, grantedAfter := r.Landed, r.Value, r.GrantedAfter
	if mode == "unfenced" {
		if !landed || value != "stale holder" {
			t.Fatal("negative control: the unfenced stale write did not land; the test cannot see the bug")
		}
		return
	}
	if grantedAfter < faultTimeout/2 { // its last ping was at most a third of the timeout before the stop
		t.Fatalf("the next holder got the key %v after the stop, before the stopped holder's session (%v) could expire", grantedAfter, faultTimeout)
	}
	if landed || value != "next holder" {
		t.Fatalf("the stopped holder's fenced write landed=%v; resource %q", landed, value)
	}
}
