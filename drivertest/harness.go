package drivertest

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Harness is what a store gives the suite: how to make clients of one
// running server, and optional hooks for the cases that need more.
type Harness struct {
	// New returns a new client of the same server on each call (its own
	// connections, as another process would have), closed by t.Cleanup.
	// The race case calls it Clients times. Required. The store it returns
	// declares the primitives it offers by implementing their interfaces
	// (driver.Mutex, driver.Semaphore, driver.RWMutex, driver.RateLimiter, driver.Idempotency): Run runs the suite of each, and fails a store that
	// offers none.
	New func(t *testing.T) driver.Store

	// Pause, if set, makes the server unavailable (stopped, frozen or cut
	// off) and returns a function that makes it available again with its
	// state intact. Without it the UnavailableIsNoAnswer case is skipped.
	Pause func(t *testing.T) (resume func())

	// Kill, if set, abandons client s as a crashed process would: no
	// release, no renewal, its connections gone. Session-based stores need
	// it for the KilledSessionFreesItsKeys case (skipped without it).
	Kill func(t *testing.T, s driver.Store)

	// KeepAlive renews the session of client s (session-based stores), as
	// a client holding keys between calls would. Unset, it is the store's
	// driver.SessionKeeper, if the store (or one it wraps) has one. The
	// suite holds keys without renewing them for up
	// to about a second, or longer when the machine stalls; a realistic
	// session (several seconds) survives that only if renewed. The suite
	// calls it every SessionTTL/4 for each client it makes, from a
	// goroutine that stops when the client's test ends, before Kill, and
	// during SessionExtendRenews (which checks that Extend alone renews).
	// Its errors are ignored: a failed renewal shows as a lost key. The
	// clients New returns must then be comparable (pointers, or structs
	// of them). Without it, or a SessionKeeper, nothing renews a session
	// between calls.
	KeepAlive func(ctx context.Context, s driver.Store) error

	// Foreign, if set, puts a value that is not a lock at key, the way a
	// user's own data could sit in the store's key space. The Lister case
	// then checks that List skips it.
	Foreign func(t *testing.T, key string)

	// Slack is the scheduling allowance added to every time bound; 0 means
	// DefaultSlack.
	Slack time.Duration

	// ShortTTL, if above the default (150 ms, or the store's MinTTL), is the
	// lease of the expiry cases. A store whose per-call timeouts derive from
	// the lease (Redlock bounds each node's answer by a third of it) needs a
	// longer one to answer at all on a loaded machine, where -race and
	// other test processes stretch every round trip.
	ShortTTL time.Duration

	// InspectFenceMayBeLater declares that Inspect reports, for a held key,
	// a fence at least the holding's rather than exactly it (Redlock: the
	// largest fence any node issued). The Inspect case then checks Fence >=
	// the holding's.
	InspectFenceMayBeLater bool

	// BreakForgottenBySweep declares that the store's sweep may delete a
	// broken holding's record at any moment after Break, after which the
	// broken holder's Extend and Release answer NotHeld(false) (the
	// deviation driver.Breaker lets a store document; pgstore's lease
	// table). The Break case then takes a holding and breaks it again, on
	// a new key, when the broken holder's answers say expired, at most 3
	// times: at least one must see NotHeld(taken).
	BreakForgottenBySweep bool

	// Skip names cases the store is known to fail ("Case", in every
	// primitive's suite that has it, or "Primitive/Case"), each with the reason
	// (a finding to fix, not a rule to relax): they are skipped and the
	// reason is printed, so the deviation stays visible in the store's
	// test file and in every run.
	Skip map[string]string

	// Clients and Goroutines shape the race case: Goroutines goroutines on
	// each of Clients clients (0 means 3 and 4). Rounds is how many times
	// each goroutine takes the key (0 means 5).
	Clients, Goroutines, Rounds int
}

// DefaultSlack is the scheduling allowance when Harness.Slack is 0.
const DefaultSlack = 500 * time.Millisecond

// StateReporter is an optional interface of the store under test (usually
// a test's wrapper around it, found through driver.As) for the
// NoStateLeftAfterRetention case: how long the store keeps a released key's
// state, and how much it keeps for a key. Absent: that case is skipped, and
// says so.
type StateReporter interface {
	// Retention is how long the store may keep state for a key after the
	// key was released or its lease ended.
	Retention() time.Duration
	// KeyState returns how many entries (server keys, map entries) the
	// store holds for key. An error fails the case.
	KeyState(ctx context.Context, key string) (int, error)
}

// suite is one run: the harness with its defaults filled in and the
// durations derived from the store's Model.
type suite struct {
	h     Harness
	model driver.Model
	// ttl is the short lease of the expiry cases; long is a lease no case
	// outlives.
	ttl, long, slack time.Duration
	// ren runs Harness.KeepAlive for the clients the suite made.
	ren renewals
}

// baseTTL is the short lease before the store's model raises it.
const baseTTL = 150 * time.Millisecond

// newSuite derives the run's durations from m.
func newSuite(h Harness, m driver.Model) *suite {
	s := &suite{h: h, model: m, slack: h.Slack, long: 10 * time.Second}
	if s.slack <= 0 {
		s.slack = DefaultSlack
	}
	s.ttl = roundUp(max(baseTTL, m.MinTTL, h.ShortTTL), m.Granularity)
	s.long = roundUp(max(s.long, 20*s.ttl), m.Granularity)
	if m.MaxTTL > 0 && s.long > m.MaxTTL {
		s.long = m.MaxTTL
	}
	if h.Clients <= 0 {
		s.h.Clients = 3
	}
	if h.Goroutines <= 0 {
		s.h.Goroutines = 4
	}
	if h.Rounds <= 0 {
		s.h.Rounds = 5
	}
	return s
}

func roundUp(d, g time.Duration) time.Duration {
	if g > 0 && d%g != 0 {
		d += g - d%g
	}
	return d
}

// testCase is one case of the mutex suite: its name (the rule it checks)
// and its body.
type testCase struct {
	name string
	fn   func(*testing.T, driver.Mutex)
}

// primitiveCase is one case of a primitive's suite, on a store that offers
// the primitive.
type primitiveCase struct {
	name string
	fn   func(*testing.T, driver.Store)
}

// primitiveSuite is the conformance suite of one primitive: the cases every
// store that offers it must pass.
type primitiveSuite struct {
	// name names the primitive, as the subtest of its cases.
	name string
	// offers reports whether store s offers the primitive (implements its
	// interface itself, not through a wrapper: a wrapper intercepts the
	// primitive's methods).
	offers func(s driver.Store) bool
	// cases lists the suite's cases, in the order they run.
	cases func(s *suite) []primitiveCase
}

// primitives are the suites the harness knows, one per primitive.
var primitives = []primitiveSuite{
	{"Mutex", func(s driver.Store) bool { _, ok := s.(driver.Mutex); return ok }, (*suite).mutexSuite},
	{"Semaphore", func(s driver.Store) bool { _, ok := s.(driver.Semaphore); return ok }, (*suite).semaphoreSuite},
	{"RWMutex", func(s driver.Store) bool { _, ok := s.(driver.RWMutex); return ok }, (*suite).rwSuite},
	{"RateLimiter", func(s driver.Store) bool { _, ok := s.(driver.RateLimiter); return ok }, (*suite).rateSuite},
	{"Idempotency", func(s driver.Store) bool { _, ok := s.(driver.Idempotency); return ok }, (*suite).idempotencySuite},
}

// offered returns the suites of the primitives s offers.
func offered(s driver.Store) []primitiveSuite {
	var ps []primitiveSuite
	for _, p := range primitives {
		if p.offers(s) {
			ps = append(ps, p)
		}
	}
	return ps
}

// Run runs the suite of each primitive the store offers (driver.Mutex,
// driver.Semaphore, driver.RWMutex, driver.RateLimiter and driver.Idempotency
// today), as a subtest named after it, against clients made by h.New. It
// fails t (through its subtests) for every rule the store breaks, and skips
// the cases whose capability or hook is absent, saying which.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("drivertest: Harness.New is nil")
	}
	probe := h.New(t)
	ps := offered(probe)
	if len(ps) == 0 {
		t.Fatalf("drivertest: the store (%T) offers no primitive the suite knows (driver.Mutex, driver.Semaphore, driver.RWMutex, driver.RateLimiter, driver.Idempotency)", probe)
	}
	m := probe.Model()
	s := newSuite(h, m)
	t.Logf("model %+v: short ttl %v, long ttl %v, slack %v", m, s.ttl, s.long, s.slack)
	names := map[string]bool{}
	for _, p := range ps {
		for _, tc := range p.cases(s) {
			names[tc.name], names[p.name+"/"+tc.name] = true, true
		}
	}
	for name := range h.Skip {
		if !names[name] {
			t.Errorf("Harness.Skip names %q, which is no case of the suite", name)
		}
	}
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			for _, tc := range p.cases(s) {
				t.Run(tc.name, func(t *testing.T) {
					why, ok := h.Skip[p.name+"/"+tc.name]
					if !ok {
						why, ok = h.Skip[tc.name]
					}
					if ok {
						t.Skipf("known failure, skipped by the harness: %s", why)
					}
					tc.fn(t, s.store(t))
				})
			}
		})
	}
}

// mutexSuite is the mutex suite, on stores that offer driver.Mutex.
func (s *suite) mutexSuite() []primitiveCase {
	var pcs []primitiveCase
	for _, tc := range s.cases() {
		pcs = append(pcs, primitiveCase{tc.name, func(t *testing.T, st driver.Store) { tc.fn(t, st.(driver.Mutex)) }})
	}
	return pcs
}

// cases lists every case of the mutex suite in the order they run.
func (s *suite) cases() []testCase {
	cs := []testCase{
		{"ModelIsStable", s.testModel},
		{"AcquireFreeKey", s.testAcquireFree},
		{"ContendedReturnsRemaining", s.testContended},
		{"ReentryCountsHolds", s.testReentry},
		{"FencesStrictlyIncrease", s.testFences},
		{"ExtendByOwner", s.testExtend},
		{"NonOwnerChangesNothing", s.testNonOwner},
		{"ExtendAfterReleaseNeverRecreates", s.testExtendAfterRelease},
		{"HostileKeysAndTokens", s.testHostile},
		{"CancelledContextChangesNothing", s.testCancelled},
		{"ReleaseWithEndedContextChangesNothing", s.testReleaseEnded},
		{"RaceOneKeyNoOverlap", s.testRace},
		{"UnavailableIsNoAnswer", s.testUnavailable},
	}
	if s.model.Session {
		cs = append(cs,
			testCase{"SessionExtendRenews", s.testSessionExtend},
			testCase{"KilledSessionFreesItsKeys", s.testKilledSession},
			testCase{"ReleaseWithEndedContextFreesSessionKey", s.testReleaseEndedContext},
			testCase{"NestedFixedLeaseEndingFreesSessionKey", s.testNestedFixedLeaseEnds},
		)
	} else {
		cs = append(cs,
			testCase{"ExpiryFreesKey", s.testExpiry},
			testCase{"ExpiredHolderCannotTouchNextHolder", s.testExpiredHolder},
			testCase{"ExtendNeverRecreates", s.testExtendNoRecreate},
			testCase{"ReentryNeverShortensTheHolding", s.testReentryNeverShortens},
			testCase{"ExtendShorterShortensTheHolding", s.testExtendShorterShortens},
			testCase{"NestedExtendShorterKeepsOuterHeld", s.testNestedExtendShorter},
			testCase{"NestedShortRenewalKeepsOuterHeld", s.testNestedShortRenewal},
			testCase{"OuterRenewalKeepsInnerFixedLeaseHeld", s.testOuterRenewalShorter},
		)
	}
	return append(cs,
		testCase{"NoStateLeftAfterRetention", s.testBoundedState},
		testCase{"NotifiesOnRelease", s.testNotify},
		testCase{"NoSpuriousNotifications", s.testNoSpurious},
		testCase{"ExtendBatchIsASeriesOfExtend", s.testExtendBatch},
		testCase{"InspectMatchesTheState", s.testInspect},
		testCase{"BreakerFreesTheKeyAndFencesKeepRising", s.testBreak},
		testCase{"MetaKeeperKeepsTheHoldingsMetadata", s.testMeta},
		testCase{"ListerListsHeldKeysOnly", s.testLister},
		testCase{"WaiterCounterCountsWaiters", s.testWaiters},
		testCase{"QueuerServesInOrder", s.testQueueFIFO},
		testCase{"QueuerCancelledWaiterLeavesNothing", s.testQueueCancel},
		testCase{"QueuerWaiterGetsKeyWhenHolderEnds", s.testQueueExpiry},
		testCase{"QueueReaderReadsWhatTheHolderCommitted", s.testQueueRead},
		testCase{"TransferIsANewHolding", s.testTransfer},
		testCase{"AtomicStepsAreOwnerChecked", s.testReadAndCommit},
		testCase{"AtomicTransferReadsAndWrites", s.testTransferReadAndWrite},
		testCase{"LostNestedHoldingThenHandoffFreesTheKey", s.testLostNestedThenHandoff},
		testCase{"ModelRandomHoldingsNeverOverlapAndFreeTheKey", s.testModelRuns},
	)
}
