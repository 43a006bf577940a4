package drivertest

import (
	"errors"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/stepcall"
)

// Cases for driver.Transferer and driver.Atomic, skipped on stores without
// them. Resources are named "<name>:{<key>}", so that a store sharding by hash tag (Redis Cluster)
// finds them in the lock's slot; the data is set and observed through the
// capabilities themselves, so the suite needs no access to the data store.

func resource(key, name string) string { return name + ":{" + key + "}" }

// testTransfer: Transfer of a held key is a new holding (a greater fence, one
// hold); from a non-holder it returns NotHeld and changes nothing; of a
// re-entered key it returns ErrInvalid (driver.Transferer).
func (s *suite) testTransfer(t *testing.T, m driver.Mutex) {
	tr, ok := driver.As[driver.Transferer](m)
	if !ok {
		t.Skip("not a driver.Transferer")
	}
	key, a, b := Key(t), Token(), Token()
	_, err := tr.Transfer(ctx(t), key, a, b, s.long)
	wantNotHeld(t, err, driver.ErrExpired)
	g1 := mustAcquire(t, m, key, a, s.long)
	_, err = tr.Transfer(ctx(t), key, Token(), b, s.long)
	wantNotHeld(t, err, driver.ErrTaken)
	mustAcquire(t, m, key, a, s.long) // re-entered: not transferable
	if _, err := tr.Transfer(ctx(t), key, a, b, s.long); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("Transfer of a re-entered lock: %v, want ErrInvalid", err)
	}
	mustRelease(t, m, key, a)
	g2, err := tr.Transfer(ctx(t), key, a, b, s.long)
	if err != nil || g2.Fence <= g1.Fence || g2.Holds != 1 {
		t.Fatalf("Transfer = %+v, %v; want a greater fence than %d and one hold", g2, err, g1.Fence)
	}
	wantNotHeld(t, m.Release(ctx(t), key, a), driver.ErrTaken)
	s.wantContended(t, m, key)
	mustRelease(t, m, key, b)
	mustRelease(t, m, key, s.mustTok(t, m, key))
}

// readWrite returns the store as a driver.Atomic (twice: the reading and
// the writing side), skipping the test if it is not one.
func readWrite(t *testing.T, m driver.Mutex) (driver.Atomic, driver.Atomic) {
	a, ok := driver.As[driver.Atomic](m)
	if !ok {
		t.Skip("not a driver.Atomic")
	}
	return a, a
}

// readAt acquires key with a fresh token reading res, releases it, and
// returns the value read.
func (s *suite) readAt(t *testing.T, m driver.Mutex, r driver.Atomic, key, res string) driver.Value {
	t.Helper()
	tok := Token()
	_, v, err := stepcall.AcquireRead(ctx(t), r, key, tok, s.long, res)
	if err != nil {
		t.Fatalf("AcquireRead(%q, %q): %v", key, res, err)
	}
	mustRelease(t, m, key, tok)
	return v
}

// testReadAndCommit: an Atomic step's write lands only with the holder's
// release, a refused lock part writes nothing, and reads see the state right
// after the step (driver.Atomic).
func (s *suite) testReadAndCommit(t *testing.T, m driver.Mutex) {
	r, c := readWrite(t, m)
	key, a := Key(t), Token()
	res := resource(key, "res")
	if v := s.readAt(t, m, r, key, res); v.Found {
		t.Fatalf("a resource never written read as %+v", v)
	}
	err := stepcall.ReleaseWrite(ctx(t), c, key, a, res, "free")
	wantNotHeld(t, err, driver.ErrExpired)
	g, v, err := stepcall.AcquireRead(ctx(t), r, key, a, s.long, res)
	if err != nil || g.Holds != 1 || v.Found {
		t.Fatalf("AcquireRead = %+v %+v %v", g, v, err)
	}
	wantNotHeld(t, stepcall.ReleaseWrite(ctx(t), c, key, Token(), res, "taken"), driver.ErrTaken)
	if err := stepcall.ReleaseWrite(ctx(t), c, key, a, res, "v1"); err != nil {
		t.Fatalf("ReleaseWrite by the holder: %v", err)
	}
	if v := s.readAt(t, m, r, key, res); v != (driver.Value{Data: "v1", Found: true}) {
		t.Fatalf("after ReleaseWrite of v1 (and two refused ones) read %+v", v)
	}
	// Re-entered: the write lands and one hold goes.
	mustAcquire(t, m, key, a, s.long)
	mustAcquire(t, m, key, a, s.long)
	if err := stepcall.ReleaseWrite(ctx(t), c, key, a, res, ""); err != nil {
		t.Fatal(err)
	}
	s.wantContended(t, m, key)
	mustRelease(t, m, key, a)
	if v := s.readAt(t, m, r, key, res); v != (driver.Value{Found: true}) {
		t.Fatalf("an empty value read back as %+v", v)
	}
}

// testTransferReadAndWrite: a Transfer step writes and reads with the
// transfer, only for the holder (driver.Atomic, driver.Transfer).
func (s *suite) testTransferReadAndWrite(t *testing.T, m driver.Mutex) {
	r, c := readWrite(t, m)
	key, a, b, d := Key(t), Token(), Token(), Token()
	res, other := resource(key, "res"), resource(key, "other")
	g1 := mustAcquire(t, m, key, a, s.long)
	if err := stepcall.ReleaseWrite(ctx(t), c, key, a, other, "o"); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, m, key, a, s.long)
	if _, _, err := stepcall.TransferWrite(ctx(t), c, key, Token(), b, s.long, res, "bad", ""); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("TransferWrite by a non-holder: %v, want ErrTaken", err)
	}
	g2, v, err := stepcall.TransferWrite(ctx(t), c, key, a, b, s.long, res, "v1", other)
	if err != nil || g2.Fence <= g1.Fence || g2.Holds != 1 || v != (driver.Value{Data: "o", Found: true}) {
		t.Fatalf("TransferWrite = %+v %+v %v; want a greater fence and the other resource's value", g2, v, err)
	}
	g3, v, err := stepcall.TransferRead(ctx(t), r, key, b, d, s.long, res)
	if err != nil || g3.Fence <= g2.Fence || v != (driver.Value{Data: "v1", Found: true}) {
		t.Fatalf("TransferRead = %+v %+v %v; want a greater fence and v1", g3, v, err)
	}
	wantNotHeld(t, m.Release(ctx(t), key, b), driver.ErrTaken)
	mustRelease(t, m, key, d)
}
