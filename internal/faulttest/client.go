package faulttest

import (
	"context"
	"testing"
	"time"

	"example.com/dlock"
)

// CloseOnCleanup closes c when the test ends, so that no background
// give-back of the Client (a release retried until the store answers, see
// dlock.Client.Close) outlives the test and its server: within 2 s, after
// which Close stops them.
func CloseOnCleanup(t testing.TB, c *dlock.Client) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
}
