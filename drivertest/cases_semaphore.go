package drivertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// The semaphore suite: the rules of driver.Semaphore, on stores that offer
// it. Each case names the rule it checks; the timed ones are in
// cases_semaphore_ttl.go, the concurrent one in cases_semaphore_race.go.

// semaphoreSuite lists the cases of the semaphore suite in the order they
// run.
func (s *suite) semaphoreSuite() []primitiveCase {
	cs := []struct {
		name string
		fn   func(*testing.T, driver.Semaphore)
	}{
		{"AcquireWithinTheLimit", s.testSemAcquire},
		{"LimitMismatchChangesNothing", s.testSemMismatch},
		{"ManyPermitsAllOrNothing", s.testSemAllOrNothing},
		{"ReacquireBySameTokenIsTheSameHolding", s.testSemReacquire},
		{"FencesStrictlyIncrease", s.testSemFences},
		{"NonHolderChangesNothing", s.testSemNonHolder},
		{"CancelledContextChangesNothing", s.testSemCancelled},
		{"InvalidArgumentsChangeNothing", s.testSemInvalid},
		{"RaceNeverMoreThanTheLimit", s.testSemRace},
		{"EachHoldingExpiresOnItsOwn", s.testSemOwnExpiry},
		{"ExtendKeepsOnlyThatHolding", s.testSemExtendOnlyOwn},
		{"ExtendShorterShortensTheHolding", s.testSemExtendShorter},
		{"KilledSessionFreesItsPermits", s.testSemKilledSession},
		{"NoStateLeftAfterRetention", s.testSemBoundedState},
		{"NotifiesOnReleaseOnly", s.testSemNotify},
		{"InspectMatchesTheState", s.testSemInspect},
		{"BatchRenewsAsExtendDoes", s.testSemBatch},
	}
	pcs := make([]primitiveCase, len(cs))
	for i, c := range cs {
		pcs[i] = primitiveCase{c.name, func(t *testing.T, st driver.Store) { c.fn(t, st.(driver.Semaphore)) }}
	}
	return pcs
}

// semClient is a new client of the store as a Semaphore.
func (s *suite) semClient(t *testing.T) driver.Semaphore {
	t.Helper()
	st := s.store(t)
	m, ok := st.(driver.Semaphore)
	if !ok {
		t.Fatalf("drivertest: Harness.New returned a %T, which is no driver.Semaphore", st)
	}
	return m
}

func mustPermits(t *testing.T, m driver.Semaphore, key, tok string, n, k int, s *suite) driver.PermitGrant {
	t.Helper()
	g, err := m.AcquirePermits(ctx(t), key, tok, n, k, s.long)
	if err != nil {
		t.Fatalf("AcquirePermits(%q, n %d, k %d): %v", key, n, k, err)
	}
	if g.Permits != k || g.Fence == 0 || g.Used < k || g.Used > n || g.TTL <= 0 || g.TTL > s.long {
		t.Fatalf("AcquirePermits(n %d, k %d) = %+v: want Permits %d, fence > 0, %d <= Used <= %d, 0 < TTL <= %v", n, k, g, k, k, n, s.long)
	}
	return g
}

func mustReleasePermits(t *testing.T, m driver.Semaphore, key, tok string) {
	t.Helper()
	if err := m.ReleasePermits(ctx(t), key, tok); err != nil {
		t.Fatalf("ReleasePermits(%q): %v", key, err)
	}
}

// wantTaken asserts that k permits of key (limit n) are refused to a fresh
// token with a *PermitsTakenError saying used of n are out.
func (s *suite) wantTaken(t *testing.T, m driver.Semaphore, key string, n, k, used int) *driver.PermitsTakenError {
	t.Helper()
	_, err := m.AcquirePermits(ctx(t), key, Token(), n, k, s.long)
	return takenError(t, err, key, n, k, used)
}

// takenError fails the test unless err is the *PermitsTakenError of an
// AcquirePermits(key, n, k) refused with used permits out, and returns it.
func takenError(t *testing.T, err error, key string, n, k, used int) *driver.PermitsTakenError {
	t.Helper()
	var pe *driver.PermitsTakenError
	if !errors.As(err, &pe) || !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("AcquirePermits(%q, n %d, k %d) with %d out: got %v, want *PermitsTakenError matching ErrNotAcquired", key, n, k, used, err)
	}
	if pe.Used != used || pe.Limit != n {
		t.Fatalf("PermitsTakenError says %d of %d out, want %d of %d", pe.Used, pe.Limit, used, n)
	}
	return pe
}

// wantFreePermits asserts that k permits of key are free: a fresh token
// takes them (and gives them back).
func (s *suite) wantFreePermits(t *testing.T, m driver.Semaphore, key string, n, k int) {
	t.Helper()
	tok := Token()
	mustPermits(t, m, key, tok, n, k, s)
	mustReleasePermits(t, m, key, tok)
}

// testSemAcquire: holdings are granted while permits are free, on any
// client, and refused with the count and the earliest expiry once the limit
// is reached; a release gives the permits back.
func (s *suite) testSemAcquire(t *testing.T, m driver.Semaphore) {
	key, a, b := Key(t), Token(), Token()
	ga := mustPermits(t, m, key, a, 3, 1, s)
	gb := mustPermits(t, s.semClient(t), key, b, 3, 2, s)
	if ga.Used != 1 || gb.Used != 3 {
		t.Fatalf("Used after 1 then 2 permits of 3 = %d, %d; want 1, 3", ga.Used, gb.Used)
	}
	pe := s.wantTaken(t, s.semClient(t), key, 3, 1, 3)
	if pe.Remaining == 0 || pe.Remaining > s.long {
		t.Fatalf("Remaining = %v with holdings of %v: want (0, %v], or negative if unknown", pe.Remaining, s.long, s.long)
	}
	mustReleasePermits(t, m, key, b)
	s.wantFreePermits(t, m, key, 3, 2)
	mustReleasePermits(t, m, key, a)
	s.wantFreePermits(t, m, key, 3, 3)
}

// testSemMismatch: while permits are out, another n is refused with a
// *LimitMismatchError and takes nothing; once none is out, the next n is
// stored.
func (s *suite) testSemMismatch(t *testing.T, m driver.Semaphore) {
	key, a := Key(t), Token()
	mustPermits(t, m, key, a, 3, 1, s)
	for _, n := range []int{5, 2, 1} {
		_, err := s.semClient(t).AcquirePermits(ctx(t), key, Token(), n, 1, s.long)
		var le *driver.LimitMismatchError
		if !errors.As(err, &le) || !errors.Is(err, driver.ErrInvalid) || le.Stored != 3 || le.Asked != n {
			t.Fatalf("AcquirePermits with n %d while 3 is stored: got %v, want *LimitMismatchError{3, %d} matching ErrInvalid", n, err, n)
		}
	}
	b := Token()
	mustPermits(t, m, key, b, 3, 2, s) // the refused calls took nothing
	s.wantTaken(t, m, key, 3, 1, 3)
	mustReleasePermits(t, m, key, a)
	mustReleasePermits(t, m, key, b)
	c := Token()
	mustPermits(t, m, key, c, 5, 4, s) // none out: 5 is stored
	if _, err := m.AcquirePermits(ctx(t), key, Token(), 3, 1, s.long); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("AcquirePermits with n 3 after 5 was stored: got %v, want ErrInvalid", err)
	}
	mustPermits(t, m, key, Token(), 5, 1, s)
	mustReleasePermits(t, m, key, c)
}

// testSemAllOrNothing: k permits are granted whole or not at all: a refused
// k > 1 leaves the free permits free.
func (s *suite) testSemAllOrNothing(t *testing.T, m driver.Semaphore) {
	key, a := Key(t), Token()
	mustPermits(t, m, key, a, 3, 2, s)
	for range 3 {
		s.wantTaken(t, s.semClient(t), key, 3, 2, 2)
		s.wantTaken(t, m, key, 3, 3, 2)
	}
	c := Token()
	mustPermits(t, m, key, c, 3, 1, s) // the one free permit is still free
	s.wantTaken(t, m, key, 3, 1, 3)
	mustReleasePermits(t, m, key, a)
	b := Token()
	if g := mustPermits(t, m, key, b, 3, 2, s); g.Used != 3 {
		t.Fatalf("Used = %d after 2 + 1 permits of 3, want 3", g.Used)
	}
	mustReleasePermits(t, m, key, b)
	mustReleasePermits(t, m, key, c)
}

// testSemReacquire: a token that holds key gets the same holding back for
// the same k (no second share of permits), and an error matching
// ErrInvalid, changing nothing, for another k.
func (s *suite) testSemReacquire(t *testing.T, m driver.Semaphore) {
	key, a := Key(t), Token()
	g := mustPermits(t, m, key, a, 3, 2, s)
	again := mustPermits(t, m, key, a, 3, 2, s)
	if again.Fence != g.Fence || again.Used != 2 {
		t.Fatalf("re-acquisition by the holder = %+v, want fence %d and Used 2 (the same holding)", again, g.Fence)
	}
	if _, err := m.AcquirePermits(ctx(t), key, a, 3, 1, s.long); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("re-acquisition by the holder with another k: got %v, want ErrInvalid", err)
	}
	mustPermits(t, m, key, Token(), 3, 1, s)
	s.wantTaken(t, m, key, 3, 1, 3)
	mustReleasePermits(t, m, key, a)
	wantNotHeld(t, m.ReleasePermits(ctx(t), key, a), driver.ErrExpired) // one holding, one release
}

// testSemFences: every new holding gets a fence above every earlier one,
// with holdings overlapping, released and taken again, on two clients.
func (s *suite) testSemFences(t *testing.T, m driver.Semaphore) {
	key := Key(t)
	clients := []driver.Semaphore{m, s.semClient(t)}
	var last uint64
	var held []string
	for i := range 12 {
		if len(held) == 2 || (len(held) > 0 && i%3 == 0) {
			mustReleasePermits(t, m, key, held[0])
			held = held[1:]
		}
		tok := Token()
		g := mustPermits(t, clients[i%2], key, tok, 2, 1, s)
		if g.Fence <= last {
			t.Fatalf("holding %d got fence %d after %d: fences must strictly increase", i, g.Fence, last)
		}
		last = g.Fence
		held = append(held, tok)
		if e, err := holderClient(s, clients[i%2], m).ExtendPermits(ctx(t), key, tok, s.long); err != nil || e.Fence != g.Fence {
			t.Fatalf("ExtendPermits = %+v, %v; want fence %d kept", e, err, g.Fence)
		}
	}
}

// testSemNonHolder: ExtendPermits and ReleasePermits by a token that holds
// nothing (never did, or released) return NotHeld(false) and change
// nothing; neither re-creates a holding.
func (s *suite) testSemNonHolder(t *testing.T, m driver.Semaphore) {
	key, a, gone := Key(t), Token(), Token()
	mustPermits(t, m, key, gone, 2, 1, s)
	mustReleasePermits(t, m, key, gone)
	mustPermits(t, m, key, a, 2, 1, s)
	for _, tok := range []string{Token(), gone} {
		_, err := m.ExtendPermits(ctx(t), key, tok, s.long)
		wantNotHeld(t, err, driver.ErrExpired)
		wantNotHeld(t, m.ReleasePermits(ctx(t), key, tok), driver.ErrExpired)
	}
	free := Key(t)
	_, err := m.ExtendPermits(ctx(t), free, gone, s.long)
	wantNotHeld(t, err, driver.ErrExpired)
	s.wantFreePermits(t, m, free, 1, 1) // Extend re-created nothing
	g, err := m.ExtendPermits(ctx(t), key, a, s.long)
	if err != nil || g.Used != 1 || g.Permits != 1 {
		t.Fatalf("the holder's ExtendPermits after refused calls = %+v, %v; want Used 1, Permits 1", g, err)
	}
	mustPermits(t, m, key, Token(), 2, 1, s)
	s.wantTaken(t, m, key, 2, 1, 2)
}

// testSemCancelled: calls with a done ctx fail and change nothing.
func (s *suite) testSemCancelled(t *testing.T, m driver.Semaphore) {
	key, a := Key(t), Token()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.AcquirePermits(c, key, Token(), 2, 2, s.long); err == nil {
		t.Fatal("AcquirePermits with a cancelled context succeeded")
	}
	mustPermits(t, s.semClient(t), key, a, 2, 1, s) // the permits were all free
	if _, err := m.ExtendPermits(c, key, a, s.long); err == nil {
		t.Fatal("ExtendPermits with a cancelled context succeeded")
	}
	if err := m.ReleasePermits(c, key, a); err == nil {
		t.Fatal("ReleasePermits with a cancelled context succeeded")
	}
	mustPermits(t, m, key, Token(), 2, 1, s)
	s.wantTaken(t, m, key, 2, 1, 2) // a still holds its permit
	mustReleasePermits(t, m, key, a)
}

// testSemInvalid: bad arguments return errors matching ErrInvalid and
// change nothing.
func (s *suite) testSemInvalid(t *testing.T, m driver.Semaphore) {
	key, tok := Key(t), Token()
	bad := []struct {
		key  string
		n, k int
	}{{key, 0, 1}, {key, -1, 1}, {key, 2, 0}, {key, 2, -1}, {key, 2, 3}, {"", 2, 1}, {strings.Repeat("k", driver.MaxKeyLen+1), 2, 1}, {"\xff", 2, 1}}
	for _, b := range bad {
		if _, err := m.AcquirePermits(ctx(t), b.key, tok, b.n, b.k, s.long); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("AcquirePermits(%.12q, n %d, k %d) = %v, want ErrInvalid", b.key, b.n, b.k, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := m.AcquirePermits(ctx(t), key, tok, 2, 1, ttl); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("AcquirePermits with ttl %v = %v, want ErrInvalid", ttl, err)
		}
		if _, err := m.ExtendPermits(ctx(t), key, tok, ttl); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ExtendPermits with ttl %v = %v, want ErrInvalid", ttl, err)
		}
	}
	for _, k := range []string{"", strings.Repeat("k", driver.MaxKeyLen+1)} {
		if _, err := m.ExtendPermits(ctx(t), k, tok, s.long); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ExtendPermits(%.12q) = %v, want ErrInvalid", k, err)
		}
		if err := m.ReleasePermits(ctx(t), k, tok); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ReleasePermits(%.12q) = %v, want ErrInvalid", k, err)
		}
	}
	s.wantFreePermits(t, m, key, 2, 2) // nothing was taken, and no limit stored
	s.wantFreePermits(t, m, key, 1, 1)
}
