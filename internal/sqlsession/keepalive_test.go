package sqlsession_test

import (
	"context"
	"errors"
	"testing"

	"example.com/dlock/driver"
)

// TestEngineKeepAlive checks driver.SessionKeeper's contract on the
// engine: nil while every connection answers; a dead connection makes it
// NotHeld(false) and forgets that connection's keys only; an ended ctx
// returns its error and forgets nothing; after Close, ErrClosed. Control:
// the healthy call before the kill must return nil and forget nothing.
func TestEngineKeepAlive(t *testing.T) {
	sv := &server{locks: map[string]int{}}
	e := newEngine(sv, false)
	ctx := context.Background()
	if err := e.KeepAlive(ctx, ping(sv)); err != nil {
		t.Fatalf("nothing held: %v", err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := e.Acquire(ctx, k, "t"+k); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.KeepAlive(ctx, ping(sv)); err != nil || e.Peek("a") == nil || e.Peek("b") == nil {
		t.Fatalf("healthy: %v, a %v, b %v", err, e.Peek("a"), e.Peek("b"))
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.KeepAlive(ended, ping(sv)); !errors.Is(err, context.Canceled) || e.Peek("a") == nil {
		t.Fatalf("ended ctx: %v, a %v", err, e.Peek("a"))
	}
	dead := e.Peek("a").P
	bShares := e.Peek("b").P == dead
	dead.C.killed = true // the server dropped the connection; the engine has not noticed
	err := e.KeepAlive(ctx, ping(sv))
	if !errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrTaken) {
		t.Fatalf("dead connection: %v, want NotHeld(false)", err)
	}
	if e.Tracked("a") || e.Tracked("b") != !bShares {
		t.Fatalf("after the dead connection: a tracked %v, b tracked %v (b on it: %v)", e.Tracked("a"), e.Tracked("b"), bShares)
	}
	e.Close()
	if err := e.KeepAlive(ctx, ping(sv)); !errors.Is(err, errClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

func ping(sv *server) func(context.Context, *fake) (any, error) {
	return func(_ context.Context, c *fake) (any, error) {
		var err error
		sv.do(func() {
			if c.killed {
				err = errBroke
			}
		})
		return nil, err
	}
}
