package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// A payment request sent twice (a double click, a retry after a timeout)
// charges once: the first Do runs the charge and stores its answer, the
// second gets that answer back. The charge carries a key derived from the
// request's, so that a takeover after a crash resends the same charge,
// which the provider deduplicates. memstore stands in for a server here;
// redisstore.New(rdb, nil) is the other store with idempotency records
// today.
func Example_guard() {
	ctx := context.Background()
	guard, err := dlock.NewGuard(memstore.New(nil), 0) // results kept for DefaultRetention
	if err != nil {
		fmt.Println(err)
		return
	}
	clients := guard.Scope("client-42") // keys are the client's own
	charges := 0
	pay := func(ctx context.Context, e dlock.Execution) ([]byte, error) {
		charges++ // provider.Charge(ctx, amount, e.DownstreamKey("charge"))
		return []byte(`{"status":"paid"}`), nil
	}

	for range 2 {
		r, err := clients.Do(ctx, "order-7", "POST /pay amount=10", pay)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s replayed=%v\n", r.Value, r.Replayed)
	}
	fmt.Println("charges:", charges)

	_, err = clients.Do(ctx, "order-7", "POST /pay amount=99", pay)
	fmt.Println("other request, same key:", errors.Is(err, dlock.ErrMismatch))
	// Output:
	// {"status":"paid"} replayed=false
	// {"status":"paid"} replayed=true
	// charges: 1
	// other request, same key: true
}
