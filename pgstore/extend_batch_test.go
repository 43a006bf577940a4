package pgstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// TestExtendBatchOneStatement: renewing 300 held leases with ExtendBatch is
// one statement (one round trip once prepared), each answered as Extend
// would; a request the statement did not extend (a key nobody holds, one
// held by another token) costs one Extend more and gets its NotHeld.
// Control: 300 Extends cost 300.
func TestExtendBatchOneStatement(t *testing.T) {
	pool, qc := countedPool(t)
	s := newStore(t, pool, pgstore.Options{SweepInterval: -1})
	c := ctx(t)
	const n = 300
	reqs := make([]driver.ExtendRequest, n)
	for i := range reqs {
		reqs[i] = driver.ExtendRequest{Key: fmt.Sprintf("batch-%d", i), Token: fmt.Sprintf("tok-%d", i), TTL: time.Minute}
		if _, err := s.Acquire(c, reqs[i].Key, reqs[i].Token, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.ExtendBatch(c, reqs) // prepares the statement
	n0 := qc.n.Load()
	res := s.ExtendBatch(c, reqs)
	if got := qc.n.Load() - n0; got != 1 {
		t.Fatalf("ExtendBatch of %d held leases: %d statements, want 1", n, got)
	}
	for i, r := range res {
		if r.Err != nil || r.Grant.Holds != 1 || r.Grant.Fence == 0 || r.Grant.TTL != time.Minute {
			t.Fatalf("request %d: %+v, %v; want extended (1 hold, a fence, TTL 1m)", i, r.Grant, r.Err)
		}
	}
	info, err := s.Inspect(c, reqs[n-1].Key)
	if err != nil || info.Remaining < 50*time.Second {
		t.Fatalf("Inspect after the batch: %+v, %v; want about a minute left", info, err)
	}
	if _, err := s.Acquire(c, "batch-other", "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	odd := append(reqs[:2:2], driver.ExtendRequest{Key: "batch-free", Token: "x", TTL: time.Minute},
		driver.ExtendRequest{Key: "batch-other", Token: "x", TTL: time.Minute})
	n0 = qc.n.Load()
	res = s.ExtendBatch(c, odd)
	if got := qc.n.Load() - n0; got != 3 {
		t.Fatalf("ExtendBatch of 2 held and 2 not held: %d statements, want 3 (the batch, an Extend for each refused)", got)
	}
	if res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, driver.ErrExpired) || !errors.Is(res[3].Err, driver.ErrTaken) {
		t.Fatalf("results %+v; want 2 extended, then NotHeld (free), NotHeld (taken)", res)
	}
	n0 = qc.n.Load()
	for _, r := range reqs {
		if _, err := s.Extend(c, r.Key, r.Token, r.TTL); err != nil {
			t.Fatal(err)
		}
	}
	if got := qc.n.Load() - n0; got != n {
		t.Fatalf("control: %d Extends counted %d statements", n, got)
	}
}
