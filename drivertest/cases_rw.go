package drivertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// The read-write lock suite: the rules of driver.RWMutex, on stores that
// offer it. Each case names the rule it checks; writer preference is in
// cases_rw_prefer.go, the timed cases in cases_rw_ttl.go, the concurrent
// one in cases_rw_race.go, the capabilities in cases_rw_caps.go.
//
// A refused AcquireWrite leaves a writer-waiting mark that keeps new
// readers out for driver.WriterWaitTTL: the cases probe writers only where
// that is what they check, or on keys no reader joins afterwards.

// rwSuite lists the cases of the read-write lock suite in the order they
// run.
func (s *suite) rwSuite() []primitiveCase {
	cs := []struct {
		name string
		fn   func(*testing.T, driver.RWMutex)
	}{
		{"ReadersShareTheKey", s.testRWReadersShare},
		{"WriterExcludesEveryone", s.testRWWriterExcludes},
		{"WaitingWriterKeepsNewReadersOut", s.testRWWaitingWriter},
		{"WriterNotStarvedByOverlappingReaders", s.testRWNotStarved},
		{"WriterMarkLastsWhileRetriedThenEnds", s.testRWMarkEnds},
		{"EachReaderExpiresOnItsOwn", s.testRWOwnExpiry},
		{"WriteHoldingExpires", s.testRWWriteExpires},
		{"KilledSessionFreesItsHoldings", s.testRWKilledSession},
		{"UpgradeIsRefusedAtOnce", s.testRWUpgrade},
		{"DowngradeKeepsWritersOut", s.testRWDowngrade},
		{"ReacquireBySameTokenIsTheSameHolding", s.testRWReacquire},
		{"FencesStrictlyIncrease", s.testRWFences},
		{"NonHolderChangesNothing", s.testRWNonHolder},
		{"CancelledContextChangesNothing", s.testRWCancelled},
		{"InvalidArgumentsChangeNothing", s.testRWInvalid},
		{"RaceNoWriterWithAnyone", s.testRWRace},
		{"NoStateLeftAfterRetention", s.testRWBoundedState},
		{"NotifiesOnReleaseAndDowngradeOnly", s.testRWNotify},
		{"InspectMatchesTheState", s.testRWInspect},
		{"BatchRenewsAsExtendDoes", s.testRWBatch},
		{"KeysAreANamespaceOfTheirOwn", s.testRWNamespace},
	}
	pcs := make([]primitiveCase, len(cs))
	for i, c := range cs {
		pcs[i] = primitiveCase{c.name, func(t *testing.T, st driver.Store) { c.fn(t, st.(driver.RWMutex)) }}
	}
	return pcs
}

// rwClient is a new client of the store as an RWMutex.
func (s *suite) rwClient(t *testing.T) driver.RWMutex {
	t.Helper()
	st := s.store(t)
	m, ok := st.(driver.RWMutex)
	if !ok {
		t.Fatalf("drivertest: Harness.New returned a %T, which is no driver.RWMutex", st)
	}
	return m
}

// holderClient is the client through which a token taken through m uses
// its holding again (re-entry, extension, a queued writer's retry): other
// on a store whose holdings live in the token's lease (any client of the
// store serves the token), m on a session-based store, whose holding lives
// in the session of the client that took it.
func holderClient[T driver.Store](s *suite, m, other T) T {
	if s.model.Session {
		return m
	}
	return other
}

// mustRW takes key in mode for the long ttl and checks the grant.
func (s *suite) mustRW(t *testing.T, m driver.RWMutex, key, tok string, mode driver.RWMode) driver.RWGrant {
	t.Helper()
	g, err := rwAcquire(ctx(t), m, key, tok, mode, s.long)
	if err != nil {
		t.Fatalf("Acquire %v of %q: %v", mode, key, err)
	}
	if g.Mode != mode || g.Fence == 0 || g.TTL <= 0 || g.TTL > s.long || (mode == driver.RWRead) != (g.Readers > 0) {
		t.Fatalf("Acquire %v = %+v: want mode %v, fence > 0, 0 < TTL <= %v, Readers > 0 for a read only", mode, g, mode, s.long)
	}
	return g
}

// rwAcquire calls AcquireRead or AcquireWrite.
func rwAcquire(c context.Context, m driver.RWMutex, key, tok string, mode driver.RWMode, ttl time.Duration) (driver.RWGrant, error) {
	if mode == driver.RWWrite {
		return m.AcquireWrite(c, key, tok, ttl)
	}
	return m.AcquireRead(c, key, tok, ttl)
}

func mustReleaseRW(t *testing.T, m driver.RWMutex, key, tok string) {
	t.Helper()
	if err := m.ReleaseRW(ctx(t), key, tok); err != nil {
		t.Fatalf("ReleaseRW(%q): %v", key, err)
	}
}

func mustExtendRW(t *testing.T, m driver.RWMutex, key, tok string, ttl time.Duration) driver.RWGrant {
	t.Helper()
	g, err := m.ExtendRW(ctx(t), key, tok, ttl)
	if err != nil {
		t.Fatalf("ExtendRW(%q, %v): %v", key, ttl, err)
	}
	return g
}

// wantRWTaken asserts that a fresh token is refused key in mode with a
// *RWTakenError saying the key is held in held, and returns it. A refused
// writer leaves a mark.
func (s *suite) wantRWTaken(t *testing.T, m driver.RWMutex, key string, mode, held driver.RWMode) *driver.RWTakenError {
	t.Helper()
	_, err := rwAcquire(ctx(t), m, key, Token(), mode, s.long)
	var te *driver.RWTakenError
	if !errors.As(err, &te) || !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("Acquire %v of %q by a fresh token: got %v, want *RWTakenError matching ErrNotAcquired", mode, key, err)
	}
	if te.Held != held {
		t.Fatalf("Acquire %v refused with %v: says held %v, want %v", mode, te, te.Held, held)
	}
	return te
}

// testRWReadersShare: readers on two clients hold the key together; a
// writer is refused while any of them holds it and gets it once they have
// all gone; its grant ends its own mark, so readers get in after it.
func (s *suite) testRWReadersShare(t *testing.T, m driver.RWMutex) {
	key, a, b, w := Key(t), Token(), Token(), Token()
	ga := s.mustRW(t, m, key, a, driver.RWRead)
	gb := s.mustRW(t, s.rwClient(t), key, b, driver.RWRead)
	if ga.Readers != 1 || gb.Readers != 2 || gb.Fence == ga.Fence {
		t.Fatalf("two readers: Readers %d then %d, fences %d, %d; want 1, 2 and two fences", ga.Readers, gb.Readers, ga.Fence, gb.Fence)
	}
	for range 2 {
		_, err := m.AcquireWrite(ctx(t), key, w, s.long)
		var te *driver.RWTakenError
		if !errors.As(err, &te) || te.Held != driver.RWRead || te.Readers != 2 {
			t.Fatalf("AcquireWrite with 2 readers: got %v, want *RWTakenError held by 2 readers", err)
		}
		if te.Remaining == 0 || te.Remaining > s.long {
			t.Fatalf("Remaining = %v with readers of %v: want (0, %v], or negative if unknown", te.Remaining, s.long, s.long)
		}
	}
	mustReleaseRW(t, m, key, a)
	if _, err := m.AcquireWrite(ctx(t), key, w, s.long); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("AcquireWrite with one reader left: got %v, want ErrNotAcquired", err)
	}
	mustReleaseRW(t, m, key, b)
	if g := s.mustRW(t, m, key, w, driver.RWWrite); g.Fence <= gb.Fence {
		t.Fatalf("the writer's fence %d is not above the readers' %d", g.Fence, gb.Fence)
	}
	mustReleaseRW(t, m, key, w)
	mustReleaseRW(t, m, key, s.tookRW(t, m, key, driver.RWRead)) // the writer's grant ended its mark
}

// tookRW takes key in mode with a fresh token and returns the token.
func (s *suite) tookRW(t *testing.T, m driver.RWMutex, key string, mode driver.RWMode) string {
	t.Helper()
	tok := Token()
	s.mustRW(t, m, key, tok, mode)
	return tok
}

// testRWWriterExcludes: while a writer holds the key, readers and other
// writers are refused (Held: write, with the writer's remaining time); the
// refused writer's mark then keeps readers out until it has had the key.
func (s *suite) testRWWriterExcludes(t *testing.T, m driver.RWMutex) {
	key, w, x := Key(t), Token(), Token()
	s.mustRW(t, m, key, w, driver.RWWrite)
	other := s.rwClient(t)
	for range 2 {
		te := s.wantRWTaken(t, other, key, driver.RWRead, driver.RWWrite)
		if te.Readers != 0 || te.Remaining == 0 || te.Remaining > s.long {
			t.Fatalf("a reader refused by a writer: %+v; want Readers 0, Remaining in (0, %v] or negative", te, s.long)
		}
	}
	if _, err := other.AcquireWrite(ctx(t), key, x, s.long); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("a second writer: got %v, want ErrNotAcquired", err)
	}
	mustReleaseRW(t, m, key, w)
	if te := s.wantRWTaken(t, other, key, driver.RWRead, 0); !te.WriterWaiting {
		t.Fatalf("a reader refused by the waiting writer's mark: %+v, want WriterWaiting", te)
	}
	s.mustRW(t, other, key, x, driver.RWWrite)
	mustReleaseRW(t, other, key, x)
	mustReleaseRW(t, m, key, s.tookRW(t, m, key, driver.RWRead))
}

// testRWUpgrade: AcquireWrite by a reader is refused at once with
// ErrUpgrade (and ErrInvalid), also when it is the only reader, and
// changes nothing: it still reads, and leaves no mark (readers still join).
func (s *suite) testRWUpgrade(t *testing.T, m driver.RWMutex) {
	key, a := Key(t), Token()
	g := s.mustRW(t, m, key, a, driver.RWRead)
	for range 2 {
		_, err := m.AcquireWrite(ctx(t), key, a, s.long)
		if !errors.Is(err, driver.ErrUpgrade) || !errors.Is(err, driver.ErrInvalid) {
			t.Fatalf("AcquireWrite by the only reader: got %v, want ErrUpgrade matching ErrInvalid", err)
		}
	}
	if e := mustExtendRW(t, m, key, a, s.long); e.Mode != driver.RWRead || e.Fence != g.Fence {
		t.Fatalf("the reader after a refused upgrade: %+v, want a read holding with fence %d", e, g.Fence)
	}
	oc := s.rwClient(t)
	b := s.tookRW(t, oc, key, driver.RWRead) // no mark was left
	if _, err := holderClient(s, oc, m).AcquireWrite(ctx(t), key, b, s.long); !errors.Is(err, driver.ErrUpgrade) {
		t.Fatalf("AcquireWrite by one of two readers: got %v, want ErrUpgrade", err)
	}
	s.tookRW(t, m, key, driver.RWRead)
}

// testRWDowngrade: AcquireRead by the writer turns its holding into a read
// holding (same fence): other readers join, writers stay out until every
// reader, the downgraded one included, has gone.
func (s *suite) testRWDowngrade(t *testing.T, m driver.RWMutex) {
	key, w, x := Key(t), Token(), Token()
	gw := s.mustRW(t, m, key, w, driver.RWWrite)
	d := s.mustRW(t, m, key, w, driver.RWRead)
	if d.Fence != gw.Fence || d.Readers != 1 {
		t.Fatalf("downgrade = %+v, want a read holding with the write's fence %d, 1 reader", d, gw.Fence)
	}
	other := s.rwClient(t)
	r := Token()
	if g := s.mustRW(t, other, key, r, driver.RWRead); g.Readers != 2 || g.Fence <= gw.Fence {
		t.Fatalf("a reader after the downgrade = %+v, want 2 readers and a fence above %d", g, gw.Fence)
	}
	if e := mustExtendRW(t, m, key, w, s.long); e.Mode != driver.RWRead || e.Fence != gw.Fence {
		t.Fatalf("the downgraded holding's ExtendRW = %+v, want read with fence %d", e, gw.Fence)
	}
	if _, err := other.AcquireWrite(ctx(t), key, x, s.long); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("a writer while the downgraded holder and a reader read: got %v, want ErrNotAcquired", err)
	}
	mustReleaseRW(t, other, key, r)
	if _, err := other.AcquireWrite(ctx(t), key, x, s.long); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("a writer while the downgraded holder still reads: got %v, want ErrNotAcquired", err)
	}
	mustReleaseRW(t, m, key, w)
	s.mustRW(t, other, key, x, driver.RWWrite)
}

// testRWReacquire: a reader's AcquireRead and the writer's AcquireWrite
// return the same holding (same fence, no second reader); one release
// ends it.
func (s *suite) testRWReacquire(t *testing.T, m driver.RWMutex) {
	key, a := Key(t), Token()
	g := s.mustRW(t, m, key, a, driver.RWRead)
	if again := s.mustRW(t, holderClient(s, m, s.rwClient(t)), key, a, driver.RWRead); again.Fence != g.Fence || again.Readers != 1 {
		t.Fatalf("read re-entry = %+v, want fence %d and 1 reader (the same holding)", again, g.Fence)
	}
	mustReleaseRW(t, m, key, a)
	wantNotHeld(t, m.ReleaseRW(ctx(t), key, a), driver.ErrExpired)
	w := Token()
	gw := s.mustRW(t, m, key, w, driver.RWWrite)
	if again := s.mustRW(t, m, key, w, driver.RWWrite); again.Fence != gw.Fence {
		t.Fatalf("write re-entry = %+v, want fence %d", again, gw.Fence)
	}
	mustReleaseRW(t, m, key, w)
	wantNotHeld(t, m.ReleaseRW(ctx(t), key, w), driver.ErrExpired)
	mustReleaseRW(t, m, key, s.tookRW(t, m, key, driver.RWWrite))
}

// testRWFences: every new holding, read or write, gets a fence above every
// earlier one, over overlapping reads, writes and a downgrade on two
// clients; extension keeps it.
func (s *suite) testRWFences(t *testing.T, m driver.RWMutex) {
	key := Key(t)
	clients := []driver.RWMutex{m, s.rwClient(t)}
	var last uint64
	var readers []string
	for i := range 14 {
		mode := driver.RWRead
		if i%3 == 2 {
			mode = driver.RWWrite
			for _, r := range readers {
				mustReleaseRW(t, m, key, r)
			}
			readers = nil
		}
		tok := Token()
		g := s.mustRW(t, clients[i%2], key, tok, mode)
		if g.Fence <= last {
			t.Fatalf("holding %d (%v) got fence %d after %d: fences must strictly increase", i, mode, g.Fence, last)
		}
		last = g.Fence
		if e := mustExtendRW(t, holderClient(s, clients[i%2], m), key, tok, s.long); e.Fence != g.Fence {
			t.Fatalf("ExtendRW = %+v; want fence %d kept", e, g.Fence)
		}
		if mode == driver.RWWrite && i%2 == 0 {
			s.mustRW(t, m, key, tok, driver.RWRead) // a downgrade: same fence, checked by DowngradeKeepsWritersOut
			readers = append(readers, tok)
		} else if mode == driver.RWWrite {
			mustReleaseRW(t, m, key, tok)
		} else {
			readers = append(readers, tok)
		}
	}
}

// testRWNonHolder: ExtendRW and ReleaseRW by a token that holds nothing
// (never did, released, or only left a writer-waiting mark) return
// NotHeld(false) and change nothing; neither re-creates a holding.
func (s *suite) testRWNonHolder(t *testing.T, m driver.RWMutex) {
	key, a, gone, waiter := Key(t), Token(), Token(), Token()
	s.mustRW(t, m, key, gone, driver.RWWrite)
	mustReleaseRW(t, m, key, gone)
	s.mustRW(t, m, key, a, driver.RWRead)
	if _, err := m.AcquireWrite(ctx(t), key, waiter, s.long); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("AcquireWrite with a reader: got %v, want ErrNotAcquired", err)
	}
	for _, tok := range []string{Token(), gone, waiter} {
		_, err := m.ExtendRW(ctx(t), key, tok, s.long)
		wantNotHeld(t, err, driver.ErrExpired)
		wantNotHeld(t, m.ReleaseRW(ctx(t), key, tok), driver.ErrExpired)
	}
	if g := mustExtendRW(t, m, key, a, s.long); g.Readers != 1 || g.Mode != driver.RWRead {
		t.Fatalf("the reader's ExtendRW after refused calls = %+v; want 1 reader", g)
	}
	free := Key(t)
	_, err := m.ExtendRW(ctx(t), free, gone, s.long)
	wantNotHeld(t, err, driver.ErrExpired)
	s.mustRW(t, s.rwClient(t), free, Token(), driver.RWWrite) // Extend re-created nothing
}

// testRWCancelled: calls with a done ctx fail and change nothing; a
// cancelled AcquireWrite leaves no mark.
func (s *suite) testRWCancelled(t *testing.T, m driver.RWMutex) {
	key, a := Key(t), Token()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	for _, mode := range []driver.RWMode{driver.RWRead, driver.RWWrite} {
		if _, err := rwAcquire(c, m, key, Token(), mode, s.long); err == nil {
			t.Fatalf("Acquire %v with a cancelled context succeeded", mode)
		}
	}
	s.mustRW(t, s.rwClient(t), key, a, driver.RWRead) // the key was free
	if _, err := m.AcquireWrite(c, key, Token(), s.long); err == nil {
		t.Fatal("AcquireWrite with a cancelled context succeeded")
	}
	if _, err := m.ExtendRW(c, key, a, s.long); err == nil {
		t.Fatal("ExtendRW with a cancelled context succeeded")
	}
	if err := m.ReleaseRW(c, key, a); err == nil {
		t.Fatal("ReleaseRW with a cancelled context succeeded")
	}
	if g := s.mustRW(t, m, key, Token(), driver.RWRead); g.Readers != 2 { // no mark; a still reads
		t.Fatalf("a reader after the cancelled calls = %+v, want 2 readers", g)
	}
}

// testRWInvalid: bad keys and ttls return errors matching ErrInvalid and
// change nothing.
func (s *suite) testRWInvalid(t *testing.T, m driver.RWMutex) {
	key, tok := Key(t), Token()
	for _, k := range []string{"", strings.Repeat("k", driver.MaxKeyLen+1), "\xff"} {
		for _, mode := range []driver.RWMode{driver.RWRead, driver.RWWrite} {
			if _, err := rwAcquire(ctx(t), m, k, tok, mode, s.long); !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("Acquire %v of %.12q = %v, want ErrInvalid", mode, k, err)
			}
		}
		if _, err := m.ExtendRW(ctx(t), k, tok, s.long); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ExtendRW(%.12q) = %v, want ErrInvalid", k, err)
		}
		if err := m.ReleaseRW(ctx(t), k, tok); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ReleaseRW(%.12q) = %v, want ErrInvalid", k, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		for _, mode := range []driver.RWMode{driver.RWRead, driver.RWWrite} {
			if _, err := rwAcquire(ctx(t), m, key, tok, mode, ttl); !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("Acquire %v with ttl %v = %v, want ErrInvalid", mode, ttl, err)
			}
		}
		if _, err := m.ExtendRW(ctx(t), key, tok, ttl); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ExtendRW with ttl %v = %v, want ErrInvalid", ttl, err)
		}
	}
	mustReleaseRW(t, m, key, s.tookRW(t, m, key, driver.RWWrite)) // nothing held, no mark
	mustReleaseRW(t, m, key, s.tookRW(t, m, key, driver.RWRead))
}
