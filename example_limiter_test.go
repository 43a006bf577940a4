package dlock_test

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// 5 requests a second, a burst of 5, counted on the store's clock for every
// process that uses the store: one key is one budget for everyone, a key
// per client a budget each. memstore stands in for a server here;
// redisstore.New(rdb, nil) is the other store with rate limiters today.
func Example_limiter() {
	ctx := context.Background()
	lim, err := dlock.NewLimiter(memstore.New(nil), dlock.RateLimit{Rate: 5, Period: time.Second, Burst: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	admitted := 0
	for range 10 {
		r, err := lim.Allow(ctx, "api") // one budget overall
		if err != nil {
			fmt.Println(err)
			return
		}
		admitted += r.Allowed
	}
	fmt.Println("of 10 requests at once,", admitted, "admitted")

	r, _ := lim.Allow(ctx, "api")
	fmt.Println("next denied:", r.Allowed == 0, "retry within a second:", r.RetryAfter > 0 && r.RetryAfter <= time.Second)

	r, _ = lim.AllowN(ctx, "api:user:alice", 3) // a budget of alice's own
	fmt.Println("alice:", r.Allowed, "admitted,", r.Remaining, "left")
	// Output:
	// of 10 requests at once, 5 admitted
	// next denied: true retry within a second: true
	// alice: 3 admitted, 2 left
}
