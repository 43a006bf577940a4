package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faulttest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The holder runs in a child process (this test binary again, its role
// chosen by ETCDSTORE_FAULT_CHILD before TestMain starts any server), so
// that SIGSTOP freezes it whole: its renewal, its etcd client, its work.
var roles = faulttest.NewRoles("ETCDSTORE_FAULT_CHILD")

func init() { roles.Run() }

// holderChild locks "k", builds its fenced write (OwnerCmp) as an
// application would before writing, says "HELD <fence>", then waits for a
// line on stdin and writes the resource: through the guard, or without it
// (ETCDSTORE_FAULT_MODE=unguarded, the bug the guard prevents). It says
// "WRITE <landed>" and exits.
var _ = roles.Register("holder", func() error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv("ETCDSTORE_FAULT_EPS"), ","),
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	s, err := etcdstore.New(cli, etcdstore.Options{Prefix: os.Getenv("ETCDSTORE_FAULT_PFX"), SessionTTL: faultTTL})
	if err != nil {
		return err
	}
	dc, err := dlock.New(s, dlock.WithAutoRenew(faultTTL))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := dc.Lock(ctx, "k")
	if err != nil {
		return err
	}
	cmp, err := s.OwnerCmp("k", l.Fence())
	if err != nil {
		return err
	}
	fmt.Println("HELD", l.Fence())
	if _, err := faulttest.ReadLine(); err != nil {
		return err
	}
	txn := cli.Txn(ctx)
	if os.Getenv("ETCDSTORE_FAULT_MODE") != "unguarded" {
		txn = txn.If(cmp)
	}
	resp, err := txn.Then(clientv3.OpPut(os.Getenv("ETCDSTORE_FAULT_RES"), "stale write of fence "+strconv.FormatUint(l.Fence(), 10))).Commit()
	if err != nil {
		return err
	}
	fmt.Println("WRITE", resp.Succeeded)
	return nil
})

// The holder process is SIGSTOPped past its session TTL (3 s) on a 3-member
// cluster. Invariant: the next holder gets a greater fence, and the stopped
// holder, resumed, has its fenced write (a Txn guarded by OwnerCmp, built
// before the stop) rejected by etcd; the resource keeps the new holder's
// value. Negative control (unguarded): the same write without the guard
// lands over the new holder's value, the lost update the guard prevents.
func TestPausedHolderFencedWriteRejected(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	for _, mode := range []string{"guarded", "unguarded"} {
		t.Run(mode, func(t *testing.T) { pausedHolder(t, c, mode) })
	}
}

func pausedHolder(t *testing.T, c *etcdtest.Cluster, mode string) {
	pfx := uniq(t)
	res := pfx + "resource"
	ctx := ctxT(t, 60*time.Second)
	h := roles.Start(t, ctx, "holder", "ETCDSTORE_FAULT_EPS="+strings.Join(c.Endpoints(), ","),
		"ETCDSTORE_FAULT_PFX="+pfx, "ETCDSTORE_FAULT_RES="+res, "ETCDSTORE_FAULT_MODE="+mode)
	s, cli := newStore(t, c, pfx, faultTTL)
	dc, err := dlock.New(s, dlock.WithAutoRenew(faultTTL))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	const mine = "the next holder's write"
	r := faulttest.PausedHolder{Child: h, Next: dc, Key: "k", Wait: 4 * faultTTL,
		Write: func(fence uint64) (bool, error) {
			cmp, err := s.OwnerCmp("k", fence)
			if err != nil {
				return false, err
			}
			resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(res, mine)).Commit()
			return err == nil && resp.Succeeded, err
		},
		Value: func() (string, error) {
			got, err := cli.Get(ctx, res)
			if err != nil || len(got.Kvs) != 1 {
				return "", fmt.Errorf("the resource: %v, %v", got, err)
			}
			return string(got.Kvs[0].Value), nil
		},
	}.Run(t, ctx)
	landed := r.Landed
	if mode == "unguarded" {
		if !landed || r.Value == mine {
			t.Fatal("negative control: the unguarded stale write did not land; the test cannot see the bug")
		}
		return
	}
	if landed || r.Value != mine {
		t.Fatalf("the stopped holder's fenced write landed=%v; resource %q", landed, r.Value)
	}
}
