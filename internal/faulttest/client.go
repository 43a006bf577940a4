package faulttest

import (
	"testing"

	"example.com/dlock"
	"example.com/dlock/internal/testkit"
)

// CloseOnCleanup closes c when the test ends, so that no background
// give-back of the Client (a release retried until the store answers, see
// dlock.Client.Close) outlives the test and its server: within 2 s, after
// which Close stops them.
func CloseOnCleanup(t testing.TB, c *dlock.Client) {
	testkit.CloseOnCleanup(t, c)
}
