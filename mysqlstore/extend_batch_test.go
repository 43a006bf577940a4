package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestExtendBatchTwoStatementsPerPart: with interpolateParams=true every
// statement is one round trip. Renewing 1,200 held leases with ExtendBatch
// is 6 statements (an UPDATE and a SELECT per 500 requests), each request
// answered as Extend would; a request found not live (a key nobody holds,
// one held by another token) costs one Extend more and gets its NotHeld.
// Control: 1,200 Extends count 1,200.
func TestExtendBatchTwoStatementsPerPart(t *testing.T) {
	db, s, _ := oneSessionStore(t)
	ctx := ctxT(t)
	count := func(what string, want int, f func(ctx context.Context)) {
		t.Helper()
		q0 := questions(t, db)
		f(ctx)
		if got := questions(t, db) - q0 - 1; got != want {
			t.Fatalf("%s: %d statements, want %d", what, got, want)
		}
	}
	const n = 1200
	reqs := make([]driver.ExtendRequest, n)
	for i := range reqs {
		reqs[i] = driver.ExtendRequest{Key: fmt.Sprintf("batch-%d", i), Token: fmt.Sprintf("tok-%d", i), TTL: time.Minute}
		if _, err := s.Acquire(ctx, reqs[i].Key, reqs[i].Token, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var res []driver.ExtendResult
	count("ExtendBatch of 1,200 held leases", 6, func(ctx context.Context) { res = s.ExtendBatch(ctx, reqs) })
	for i, r := range res {
		if r.Err != nil || r.Grant.Holds != 1 || r.Grant.Fence == 0 || r.Grant.TTL != time.Minute {
			t.Fatalf("request %d: %+v, %v; want extended (1 hold, a fence, TTL 1m)", i, r.Grant, r.Err)
		}
	}
	if info, err := s.Inspect(ctx, reqs[n-1].Key); err != nil || info.Remaining < 50*time.Second {
		t.Fatalf("Inspect after the batch: %+v, %v; want about a minute left", info, err)
	}
	if _, err := s.Acquire(ctx, "batch-other", "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	odd := append(reqs[:2:2], driver.ExtendRequest{Key: "batch-free", Token: "x", TTL: time.Minute},
		driver.ExtendRequest{Key: "batch-other", Token: "x", TTL: time.Minute})
	count("ExtendBatch of 2 held and 2 not held", 4, func(ctx context.Context) { res = s.ExtendBatch(ctx, odd) })
	if res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, driver.ErrExpired) || !errors.Is(res[3].Err, driver.ErrTaken) {
		t.Fatalf("results %+v; want 2 extended, then NotHeld (free), NotHeld (taken)", res)
	}
	count("control: 1,200 Extends", n, func(ctx context.Context) {
		for _, r := range reqs {
			if _, err := s.Extend(ctx, r.Key, r.Token, r.TTL); err != nil {
				t.Fatal(err)
			}
		}
	})
}
