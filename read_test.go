package dlock_test

import (
	"testing"

	"example.com/dlock"
)

// A store without driver.Atomic (memstore hidden by faultStore here) ignores WithRead: the lease
// says nothing was read and the caller reads the resource itself.
func TestWithReadFallsBackWhenTheStoreCannotRead(t *testing.T) {
	c, _ := newClient(t)
	ctx := testCtx(t)
	l := mustLock(t, c, ctx, "k", dlock.WithRead("resource"))
	defer release(t, l)
	if v, found := l.Value(); v != "" || found || l.ValueRead() {
		t.Fatalf("Value() = %q, %v; ValueRead %v; want nothing read", v, found, l.ValueRead())
	}
}
