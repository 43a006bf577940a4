package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// sessionish keeps every key for an hour, as a session that other leases
// keep alive would, and declares the model it is given.
type sessionish struct {
	*memstore.Store
	model driver.Model
}

func (s sessionish) Model() driver.Model { return s.model }

func (s sessionish) Acquire(ctx context.Context, key, token string, _ time.Duration) (driver.Grant, error) {
	g, err := s.Store.Acquire(ctx, key, token, time.Hour)
	g.TTL = 200 * time.Millisecond
	return g, err
}

// A lease on a session-based store that is lost on the local clock (here:
// not renewed) gives its key back: the server would keep it as long as the
// session lives. Negative control: the same store declared per-key keeps
// the key after the loss (there the store's own expiry frees it).
func TestSessionStoreLostLeaseGivesTheKeyBack(t *testing.T) {
	const ttl = 200 * time.Millisecond
	for _, session := range []bool{true, false} {
		m := driver.Model{Session: session, SessionTTL: ttl, MinTTL: time.Millisecond}
		if !session {
			m.SessionTTL = 0
		}
		st := sessionish{Store: memstore.New(nil), model: m}
		c, err := dlock.New(st, dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		l := mustLock(t, c, ctx, "k")
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the unrenewed lease was never lost")
		}
		if !errors.Is(l.Err(), dlock.ErrLost) {
			t.Fatalf("lease err %v, want ErrLost", l.Err())
		}
		freed := false
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) { // polling the store's state
			if info, err := st.Inspect(ctx, "k"); err == nil && !info.Held {
				freed = true
				break
			}
		}
		if freed != session {
			t.Fatalf("session=%v: key freed after the loss = %v, want %v", session, freed, session)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
