package drivertest

import (
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/stepcall"
)

// Cases for driver.QueueReader, skipped on stores without it (or without
// driver.Atomic, which writes what it reads).

// testQueueRead: a waiter queued on another client gets, with the key, the
// value the previous holder committed with its release (Atomic Release with
// Write), not the value when it queued; on a free key it reads the current
// value at once (driver.QueueReader: "what the previous holder wrote with
// its release, and no later write").
func (s *suite) testQueueRead(t *testing.T, m driver.Mutex) {
	if _, ok := driver.As[driver.QueueReader](m); !ok {
		t.Skip("not a driver.QueueReader")
	}
	a, ok := driver.As[driver.Atomic](m)
	if !ok {
		t.Skip("a QueueReader without driver.Atomic: nothing writes with the release")
	}
	wc := waiterCounter(t, m)
	key, first, holder := Key(t), Token(), Token()
	res := resource(key, "res")
	qr, _ := driver.As[driver.QueueReader](m)
	if _, v, err := qr.AcquireQueuedRead(ctx(t), key, first, s.long, res); err != nil || v.Found {
		t.Fatalf("AcquireQueuedRead of a free key, resource never written = %+v, %v; want not found", v, err)
	}
	if err := stepcall.ReleaseWrite(ctx(t), a, key, first, res, "v1"); err != nil {
		t.Fatal(err)
	}
	g1, v, err := stepcall.AcquireRead(ctx(t), a, key, holder, s.long, res)
	if err != nil || v != (driver.Value{Data: "v1", Found: true}) {
		t.Fatalf("AcquireRead after a commit of v1 = %+v, %v", v, err)
	}
	c := s.client(t)
	waiter, _ := driver.As[driver.QueueReader](c)
	wtok := Token()
	type got struct {
		g   driver.Grant
		v   driver.Value
		err error
	}
	done := make(chan got, 1)
	go func() {
		g, v, err := waiter.AcquireQueuedRead(ctx(t), key, wtok, s.long, res)
		done <- got{g, v, err}
	}()
	s.waitWaiters(t, wc, key, 1)
	if err := stepcall.ReleaseWrite(ctx(t), a, key, holder, res, "v2"); err != nil {
		t.Fatalf("the holder's commit of v2: %v", err)
	}
	var r got
	select {
	case r = <-done:
	case <-time.After(s.slack + 10*time.Second):
		t.Fatalf("the queued waiter did not get the key within %v of the holder's commit", s.slack+10*time.Second)
	}
	if r.err != nil || r.v != (driver.Value{Data: "v2", Found: true}) || r.g.Fence <= g1.Fence {
		t.Fatalf("the queued waiter got %+v, %+v, %v; want v2 (the holder's commit) and a fence above %d", r.g, r.v, r.err, g1.Fence)
	}
	s.wantContended(t, m, key)
	mustRelease(t, c, key, wtok)
}
