package storetest

import (
	"errors"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/stepcall"
)

// The optional capabilities (Transferer, GrantReader, Committer) are checked
// when the store has them, and skipped otherwise. Resources are named
// "<name>:{<key>}", so that a store sharding by hash tag (Redis Cluster)
// finds them in the lock's slot; the data is set and observed through the
// capabilities themselves, so the suite needs no access to the data store.

func resource(key, name string) string { return name + ":{" + key + "}" }

func testTransfer(t *testing.T, s driver.Mutex) {
	tr, ok := s.(driver.Transferer)
	if !ok {
		t.Skip("not a driver.Transferer")
	}
	key, a, b := Key(t), Token(), Token()
	_, err := tr.Transfer(ctx(t), key, a, b, long)
	wantNotHeld(t, err, driver.ErrExpired)
	g1 := mustAcquire(t, s, key, a, long)
	_, err = tr.Transfer(ctx(t), key, Token(), b, long)
	wantNotHeld(t, err, driver.ErrTaken)
	mustAcquire(t, s, key, a, long) // re-entered: not transferable
	if _, err := tr.Transfer(ctx(t), key, a, b, long); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("Transfer of a re-entered lock: %v, want ErrInvalid", err)
	}
	mustRelease(t, s, key, a)
	g2, err := tr.Transfer(ctx(t), key, a, b, long)
	if err != nil || g2.Fence <= g1.Fence || g2.Holds != 1 {
		t.Fatalf("Transfer = %+v, %v; want a greater fence than %d and one hold", g2, err, g1.Fence)
	}
	wantNotHeld(t, s.Release(ctx(t), key, a), driver.ErrTaken)
	wantContended(t, s, key)
	mustRelease(t, s, key, b)
	mustRelease(t, s, key, mustTok(t, s, key))
}

// mustTok acquires key with a fresh token and returns it.
func mustTok(t *testing.T, s driver.Mutex, key string) string {
	t.Helper()
	tok := Token()
	mustAcquire(t, s, key, tok, long)
	return tok
}

// readWrite returns the store as a driver.Atomic (twice: the reading and
// the writing side), skipping the test if it is not one.
func readWrite(t *testing.T, s driver.Mutex) (driver.Atomic, driver.Atomic) {
	a, ok := driver.As[driver.Atomic](s)
	if !ok {
		t.Skip("not a driver.Atomic")
	}
	return a, a
}

// readAt acquires key with a fresh token reading res, releases it, and
// returns the value read.
func readAt(t *testing.T, s driver.Mutex, r driver.Atomic, key, res string) driver.Value {
	t.Helper()
	tok := Token()
	_, v, err := stepcall.AcquireRead(ctx(t), r, key, tok, long, res)
	if err != nil {
		t.Fatalf("AcquireRead(%q, %q): %v", key, res, err)
	}
	mustRelease(t, s, key, tok)
	return v
}

func testReadAndCommit(t *testing.T, s driver.Mutex) {
	r, c := readWrite(t, s)
	key, a := Key(t), Token()
	res := resource(key, "res")
	if v := readAt(t, s, r, key, res); v.Found {
		t.Fatalf("a resource never written read as %+v", v)
	}
	err := stepcall.ReleaseWrite(ctx(t), c, key, a, res, "free")
	wantNotHeld(t, err, driver.ErrExpired)
	g, v, err := stepcall.AcquireRead(ctx(t), r, key, a, long, res)
	if err != nil || g.Holds != 1 || v.Found {
		t.Fatalf("AcquireRead = %+v %+v %v", g, v, err)
	}
	wantNotHeld(t, stepcall.ReleaseWrite(ctx(t), c, key, Token(), res, "taken"), driver.ErrTaken)
	if err := stepcall.ReleaseWrite(ctx(t), c, key, a, res, "v1"); err != nil {
		t.Fatalf("ReleaseWrite by the holder: %v", err)
	}
	if v := readAt(t, s, r, key, res); v != (driver.Value{Data: "v1", Found: true}) {
		t.Fatalf("after ReleaseWrite of v1 (and two refused ones) read %+v", v)
	}
	// Re-entered: the write lands and one hold goes.
	mustAcquire(t, s, key, a, long)
	mustAcquire(t, s, key, a, long)
	if err := stepcall.ReleaseWrite(ctx(t), c, key, a, res, ""); err != nil {
		t.Fatal(err)
	}
	wantContended(t, s, key)
	mustRelease(t, s, key, a)
	if v := readAt(t, s, r, key, res); v != (driver.Value{Found: true}) {
		t.Fatalf("an empty value read back as %+v", v)
	}
}

func testTransferReadAndWrite(t *testing.T, s driver.Mutex) {
	r, c := readWrite(t, s)
	key, a, b, d := Key(t), Token(), Token(), Token()
	res, other := resource(key, "res"), resource(key, "other")
	g1 := mustAcquire(t, s, key, a, long)
	if err := stepcall.ReleaseWrite(ctx(t), c, key, a, other, "o"); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, s, key, a, long)
	if _, _, err := stepcall.TransferWrite(ctx(t), c, key, Token(), b, long, res, "bad", ""); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("TransferWrite by a non-holder: %v, want ErrTaken", err)
	}
	g2, v, err := stepcall.TransferWrite(ctx(t), c, key, a, b, long, res, "v1", other)
	if err != nil || g2.Fence <= g1.Fence || g2.Holds != 1 || v != (driver.Value{Data: "o", Found: true}) {
		t.Fatalf("TransferWrite = %+v %+v %v; want a greater fence and the other resource's value", g2, v, err)
	}
	g3, v, err := stepcall.TransferRead(ctx(t), r, key, b, d, long, res)
	if err != nil || g3.Fence <= g2.Fence || v != (driver.Value{Data: "v1", Found: true}) {
		t.Fatalf("TransferRead = %+v %+v %v; want a greater fence and v1", g3, v, err)
	}
	wantNotHeld(t, s.Release(ctx(t), key, b), driver.ErrTaken)
	mustRelease(t, s, key, d)
}
