package redlock

import (
	"errors"
	"testing"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// The cause of a not-held verdict must not depend on which nodes answer
// first. Five nodes, the next holder on three of them and two free: in any
// order of answers the verdict is decided only once the cause is settled,
// and then it is ErrTaken.
func TestNotHeldCauseWaitsUntilSettled(t *testing.T) {
	const n, q = 5, 3
	taken := dlock.ErrTaken
	expired := dlock.ErrExpired
	notHeld := func(cause error) error { return errors.Join(dlock.ErrNotHeld, cause) }
	for _, order := range [][]error{
		{expired, expired, taken, taken, taken},
		{taken, expired, expired, taken, taken},
		{taken, taken, taken, expired, expired},
	} {
		var v verdict
		decidedAt := -1
		for i, cause := range order {
			v.add(i, driver.Grant{}, notHeld(cause))
			if v.decided(n, q) {
				decidedAt = i
				break
			}
		}
		if decidedAt < 0 {
			t.Fatalf("order %v: never decided", order)
		}
		err := v.notHeld(n, q)
		if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrTaken) {
			t.Errorf("order %v: decided after %d answers with %v, want ErrTaken", order, decidedAt+1, err)
		}
	}
	// A settled cause is decided without waiting for the rest.
	var v verdict
	for i := range 3 {
		v.add(i, driver.Grant{}, notHeld(expired))
	}
	if !v.decided(n, q) {
		t.Fatal("three of five nodes free and two unknown: expired is settled, want decided")
	}
}
