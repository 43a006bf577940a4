package dlock

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// fakeNotifier is a driver.Notifier whose subscriptions all receive from
// one channel the test sends on; it counts the live subscriptions.
type fakeNotifier struct {
	ch   chan struct{}
	mu   sync.Mutex
	live int
}

func (f *fakeNotifier) Subscribe(context.Context, string) (<-chan struct{}, func(), error) {
	f.mu.Lock()
	f.live++
	f.mu.Unlock()
	var once sync.Once
	return f.ch, func() { once.Do(func() { f.mu.Lock(); f.live--; f.mu.Unlock() }) }, nil
}

// pending reports whether a wake-up waits on ch, taking it.
func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestTurnsWakeTheFirstAndHandOn: three waits of one key share one
// subscription; a notification wakes the first only; the first getting no
// answer wakes the second too, once, and keeps its place; the first leaving
// without the key after its wake-up hands the turn to the second, which
// acquires and wakes the third (to meet the new holding); the last to
// leave ends the subscription.
// Each step checks both the waiter that must be woken and those that must
// not, so a broadcast (the herd) or a dropped hand-on fails it.
func TestTurnsWakeTheFirstAndHandOn(t *testing.T) {
	synctest.Test(t, checkTurns)
}

func checkTurns(t *testing.T) {
	f := &fakeNotifier{ch: make(chan struct{})}
	ctx := context.Background()
	var subs [3]*turnSub
	var chs [3]<-chan struct{}
	for i := range subs {
		n, s := turnNotifier(f, nil, false)
		ch, _, err := n.Subscribe(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		subs[i], chs[i] = s, ch
	}
	if f.live != 1 {
		t.Fatalf("%d store subscriptions, want 1 shared", f.live)
	}
	woken := func(want ...bool) {
		t.Helper()
		for i, w := range want {
			if got := pending(chs[i]); got != w {
				t.Fatalf("waiter %d woken: %v, want %v", i, got, w)
			}
		}
	}
	f.ch <- struct{}{} // a release
	synctest.Wait()    // forwarded
	woken(true, false, false)
	subs[0].unanswered() // its attempt got no answer: the second tries too
	woken(false, true, false)
	subs[0].unanswered() // handed on once per wake-up
	woken(false, false, false)
	f.ch <- struct{}{}
	synctest.Wait()
	woken(true, false, false) // it kept its place
	subs[0].leave()           // e.g. cancelled after its wake-up, without the key
	woken(false, true, false)
	subs[1].acquired()
	subs[1].leave()
	woken(false, false, true) // to meet the new holding
	f.ch <- struct{}{}
	synctest.Wait()
	woken(false, false, true)
	subs[2].leave() // without the key, after a wake-up: nobody left to hand on to
	subs[2].leave() // idempotent
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live != 0 {
		t.Fatalf("%d store subscriptions left, want 0", f.live)
	}
}

// uncomparable is a notifier that cannot key a map.
type uncomparable struct {
	*fakeNotifier
	_ []int
}

// TestTurnsNeedAComparableNotifier: a notifier that cannot key a map is
// used as it is (no line, no panic).
func TestTurnsNeedAComparableNotifier(t *testing.T) {
	u := uncomparable{fakeNotifier: &fakeNotifier{}}
	if n, s := turnNotifier(u, nil, false); s != nil || n == nil {
		t.Fatalf("got %T, %v; want the store's notifier, no line", n, s)
	}
}
