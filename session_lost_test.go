package dlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
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

// A lease lost on the local clock (here: not renewed) gives its key back,
// on a session store (the server would keep it as long as the session
// lives) and on a per-key store alike, and never within the validity the
// lease reported. Negative control: with the store's Release broken (it
// answers success and frees nothing) the key is never freed, so the check
// can fail.
func TestLostLeaseGivesTheKeyBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 200 * time.Millisecond
		for _, tc := range []struct {
			session, broken bool
		}{{true, false}, {false, false}, {true, true}} {
			m := driver.Model{Session: tc.session, SessionTTL: ttl, MinTTL: time.Millisecond}
			if !tc.session {
				m.SessionTTL = 0
			}
			st := sessionish{Store: memstore.New(nil), model: m}
			var store driver.Mutex = st
			if tc.broken {
				store = noRelease{st}
			}
			c, err := dlock.New(store, dlock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t)
			l := mustLock(t, c, ctx, "k")
			within(t, l.Done(), 5*time.Second, "the unrenewed lease's loss")
			if !errors.Is(l.Err(), dlock.ErrLost) {
				t.Fatalf("lease err %v, want ErrLost", l.Err())
			}
			held := func() bool {
				info, err := st.Inspect(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				return info.Held
			}
			// On the bubble's clock: still held up to the end of the validity
			// the lease reported, and given back within 2 s of the loss.
			time.Sleep(time.Until(l.ValidUntil()) - time.Nanosecond)
			synctest.Wait()
			if !held() {
				t.Fatalf("%+v: key freed before the lost lease's validity ended", tc)
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			freed := !held()
			if freed == tc.broken {
				t.Fatalf("%+v: key freed after the loss = %v, want %v", tc, freed, !tc.broken)
			}
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// noRelease is a store whose Release answers success and frees nothing.
type noRelease struct{ driver.Mutex }

func (noRelease) Release(context.Context, string, string) error { return nil }
