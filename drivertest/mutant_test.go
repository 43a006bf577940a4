package drivertest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/memstore"
)

// mutantEnv names the store TestMutantChild runs the suite on: "memstore",
// "reference" (refStore without a bug), "session" (refSession clients of
// a refStore without a bug), "atomic" (refAtomic without a bug), "sem"
// (semMutant without a bug: memstore's Semaphore alone), "rw" (rwMutant
// without a bug: memstore's RWMutex alone), "rate"
// (rateMutant without a bug: memstore's RateLimiter alone), "idem"
// (idemMutant without a bug: memstore's Idempotency alone) or a
// mutation (session-based for the
// session-* ones).
const mutantEnv = "DRIVERTEST_MUTANT"

// childTimeout bounds one run of the suite in a subprocess.
const childTimeout = 150 * time.Second // the model case alone takes about 20 s, 25 s on a mutant

// TestMutantChild runs the suite on the store named by $DRIVERTEST_MUTANT.
// It is the subprocess of TestMutantsFailTheSuite and
// TestReferenceStoresPassTheSuite, and skips when run directly.
func TestMutantChild(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("runs as a subprocess of TestMutantsFailTheSuite")
	}
	var s driver.Store
	h := drivertest.Harness{New: func(*testing.T) driver.Store { return s }}
	switch {
	case name == "memstore":
		s = memstore.New(nil)
	case name == string(metaLastWins):
		s = newMetaMutant()
	case strings.HasPrefix(name, "rw"):
		m := mutation(name)
		if name == "rw" {
			m = correct
		}
		s = newRWMutant(m)
	case strings.HasPrefix(name, "sem"):
		m := mutation(name)
		if name == "sem" {
			m = correct
		}
		s = newSemMutant(m)
	case name == string(rateCallerClock):
		h.New = func(next func() driver.Store) func(*testing.T) driver.Store {
			return func(*testing.T) driver.Store { return next() }
		}(callerClocks())
	case strings.HasPrefix(name, "rate"):
		m := mutation(name)
		if name == "rate" {
			m = correct
		}
		s = newRateMutant(m)
	case strings.HasPrefix(name, "idem"):
		m := mutation(name)
		if name == "idem" {
			m = correct
		}
		s = newIdemMutant(m)
	case strings.HasPrefix(name, "session"):
		m := mutation(name)
		if name == "session" {
			m = correct
		}
		r := newRef(m)
		h.New = func(*testing.T) driver.Store { return newRefSession(r) }
		h.Kill = func(_ *testing.T, c driver.Store) { c.(*refSession).kill() }
		h.KeepAlive = func(ctx context.Context, c driver.Store) error { return c.(*refSession).keepAliveHook(ctx) }
	case name == "atomic" || name == string(queueReadEarly):
		m := mutation(name)
		if name == "atomic" {
			m = correct
		}
		r := newRefAtomic(m)
		s = r
		h.Pause = func(*testing.T) func() { return r.pause() }
	case name == "reference":
		name = string(correct)
		fallthrough
	default:
		r := newRef(mutation(name))
		s = r
		h.Foreign = func(_ *testing.T, key string) { r.putForeign(key) }
		h.Pause = func(*testing.T) func() { return r.pause() }
	}
	drivertest.Run(t, h)
}

// runChild runs the suite on store in a subprocess, with modelTime as the
// model case's budget (DLOCK_MODEL_TIME), and returns its output and exit
// error.
func runChild(t *testing.T, store string, modelTime time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMutantChild$", "-test.v", "-test.count=1",
		"-test.timeout="+childTimeout.String())
	cmd.Env = append(os.Environ(), mutantEnv+"="+store, "DLOCK_MODEL_TIME="+modelTime.String())
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s: the suite did not finish within %v:\n%s", store, childTimeout, tail(out))
	}
	return string(out), err
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: TestMutantChild/(Mutex|Semaphore|RWMutex|RateLimiter|Idempotency)/(\S+)`)

// failed returns the cases that failed in a child's output: a mutex case by
// its name, a semaphore, read-write lock, rate limiter or idempotency case as
// "<Primitive>/<name>".
func failed(out string) []string {
	var names []string
	for _, m := range failLine.FindAllStringSubmatch(out, -1) {
		if m[1] == "Mutex" {
			names = append(names, m[2])
		} else {
			names = append(names, m[1]+"/"+m[2])
		}
	}
	return names
}

func tail(out []byte) string {
	const n = 3000
	if len(out) > n {
		return "…" + string(out[len(out)-n:])
	}
	return string(out)
}

// whyLine marks a line of a child's output that says why a case failed:
// the model case's invariant and trace lines, a failed check's message.
var whyLine = regexp.MustCompile(`invariant [12]:|lease still valid|trace \(replay|^\s+\+\d+ms |\.go:\d+: .*(want|got|fail|Fatal|violat)`)

// why returns the lines of a child's output that say why a case failed
// (tail shows only the end of it), at most 150.
func why(out string) string {
	var b strings.Builder
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if n < 150 && whyLine.MatchString(line) {
			b.WriteString(line + "\n")
			n++
		}
	}
	return b.String()
}

// modelCase is the model-based case (issue 23).
const modelCase = "ModelRandomHoldingsNeverOverlapAndFreeTheKey"

// metaCase checks driver.MetaKeeper.
const metaCase = "MetaKeeperKeepsTheHoldingsMetadata"

// releaseEndedCase checks driver.Mutex.Release with an ended context.
const releaseEndedCase = "ReleaseWithEndedContextChangesNothing"

// TestMutantsFailTheSuite: each store broken on purpose fails the suite,
// and among its failures is the case that names the rule it breaks (and,
// where given, the failure says what it saw). The controls are in
// TestReferenceStoresPassTheSuite.
func TestMutantsFailTheSuite(t *testing.T) {
	cases := []struct {
		m        mutation
		mustFail []string
		saying   string
	}{
		{noOwnerCheck, []string{"NonOwnerChangesNothing"}, ""},
		{acquireIgnoresHolder, []string{"RaceOneKeyNoOverlap", "ContendedReturnsRemaining"}, "overlaps in"},
		{noExpiry, []string{"ExpiryFreesKey", "ExtendShorterShortensTheHolding"}, ""},
		{fenceStuck, []string{"FencesStrictlyIncrease", "RaceOneKeyNoOverlap"}, "fences out of holding order"},
		{extendRecreates, []string{"ExtendAfterReleaseNeverRecreates", "ExtendNeverRecreates"}, ""},
		{reentryShortens, []string{"ReentryNeverShortensTheHolding"}, ""},
		{spuriousNotify, []string{"NoSpuriousNotifications"}, "never released"},
		{queueLIFO, []string{"QueuerServesInOrder"}, ""},
		{sessionNoRenew, []string{"SessionExtendRenews"}, ""},
		{answersWhenDown, []string{"UnavailableIsNoAnswer"}, "no definite answer"},
		{sessionOutlivesKill, []string{"KilledSessionFreesItsKeys", "QueuerWaiterGetsKeyWhenHolderEnds"}, ""},
		{queueReadEarly, []string{"QueueReaderReadsWhatTheHolderCommitted"}, "want v2"},
		{releaseAllHolds, []string{modelCase, "NestedExtendShorterKeepsOuterHeld"}, "invariant 1"},
		{extendHalf, []string{modelCase}, ""},
		{releaseNoop, []string{modelCase}, "invariant 2"},
		{releaseIgnoresCtx, []string{releaseEndedCase}, "want an error matching context canceled"},
		{sessionForgetsEnded, []string{releaseEndedCase}, "a live Release of key a after the ended ones"},
		{breakResetsFence, []string{"BreakerFreesTheKeyAndFencesKeepRising"}, "want greater than the broken holding's"},
		{semNoLimit, []string{"Semaphore/RaceNeverMoreThanTheLimit", "Semaphore/AcquireWithinTheLimit"}, "more than 3 permits out at once"},
		{semMismatchAdmits, []string{"Semaphore/LimitMismatchChangesNothing"}, ""},
		{semPartialGrant, []string{"Semaphore/ManyPermitsAllOrNothing"}, ""},
		{semNoExpiry, []string{"Semaphore/EachHoldingExpiresOnItsOwn", "Semaphore/ExtendShorterShortensTheHolding"}, ""},
		{semFenceStuck, []string{"Semaphore/FencesStrictlyIncrease", "Semaphore/RaceNeverMoreThanTheLimit"}, "fences granted to two holdings"},
		{semSharedExpiry, []string{"Semaphore/EachHoldingExpiresOnItsOwn", "Semaphore/ExtendKeepsOnlyThatHolding"}, ""},
		{semBatchBlind, []string{semBatchCase}, "want ErrNotHeld"},
		{rwBatchBlind, []string{rwBatchCase}, "want ErrNotHeld"},
		{rwIgnoresMark, []string{"RWMutex/WaitingWriterKeepsNewReadersOut", "RWMutex/WriterNotStarvedByOverlappingReaders"}, "did not get in within 10 steps"},
		{rwSharedExpiry, []string{"RWMutex/EachReaderExpiresOnItsOwn"}, "while another reader renewed its own"},
		{rwWriterWithRead, []string{"RWMutex/RaceNoWriterWithAnyone", "RWMutex/ReadersShareTheKey"}, "a writer inside with another holder"},
		{rwFenceStuck, []string{"RWMutex/FencesStrictlyIncrease", "RWMutex/RaceNoWriterWithAnyone"}, "fences granted to two holdings"},
		{rwDowngradeFrees, []string{"RWMutex/DowngradeKeepsWritersOut"}, ""},
		{rwUpgradeWaits, []string{"RWMutex/UpgradeIsRefusedAtOnce"}, "want ErrUpgrade"},
		{rateChargesDenied, []string{"RateLimiter/DeniedChangesNothing"}, "want denied (Allowed 0) with Remaining 1"},
		{rateNoBurst, []string{"RateLimiter/AdmitsTheBurstThenDenies", "RateLimiter/ManyAllOrNothing"}, ""},
		{rateOffByOne, []string{"RateLimiter/AdmitsTheBurstThenDenies"}, "want Allowed 1, Remaining 4"},
		{rateNoLimit, []string{"RateLimiter/RaceAdmitsAtMostTheBudget", "RateLimiter/AdmitsTheBurstThenDenies"}, "more than the burst"},
		{ratePartialGrant, []string{"RateLimiter/ManyAllOrNothing"}, ""},
		{rateNoExpiry, []string{"RateLimiter/IdleStateExpires"}, "entries left for a key idle"},
		{rateCallerClock, []string{"RateLimiter/ClientsShareOneBudget", "RateLimiter/AdmitsTheBurstThenDenies"}, ""},
		{idemNoFenceCheck, []string{"Idempotency/StaleExecutorCannotComplete"}, "the stale executor's CompleteRecord"},
		{idemNoFingerprint, []string{"Idempotency/FingerprintMismatchChangesNothing"}, ""},
		{idemFenceStuck, []string{"Idempotency/TakeoverAfterTheLeaseHasAGreaterFence"}, "want TookOver and a greater fence"},
		{idemNoExpiry, []string{"Idempotency/TakeoverAfterTheLeaseHasAGreaterFence", "Idempotency/StaleExecutorCannotComplete", "Idempotency/RetentionForgetsTheRecord"}, "no takeover within"},
		{idemNoExclusion, []string{"Idempotency/RaceExactlyOneExecution"}, "executions of one record by"},
		{idemForgetsTakeover, []string{"Idempotency/ResentTakeoverBeginSaysTookOver"}, "resent takeover BeginRecord"},
		{metaLastWins, []string{metaCase}, `Meta "other"`},
	}
	for _, tc := range cases {
		t.Run(string(tc.m), func(t *testing.T) {
			t.Parallel() // extra load can only add failures, not hide the expected one
			// The model case gets its full budget only where it is the
			// case that must catch the mutant; elsewhere a short run.
			budget := 2 * time.Second
			if slices.Contains(tc.mustFail, modelCase) {
				budget = 20 * time.Second
			}
			out, err := runChild(t, string(tc.m), budget)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("the suite passed a store with mutation %q (err %v):\n%s", tc.m, err, tail([]byte(out)))
			}
			got := failed(out)
			for _, want := range tc.mustFail {
				if !contains(got, want) {
					t.Errorf("case %s did not fail; failed: %v", want, got)
				}
			}
			if tc.saying != "" && !strings.Contains(out, tc.saying) {
				t.Errorf("output does not say %q", tc.saying)
			}
			t.Logf("failed as expected: %v", got)
		})
	}
}

// TestReferenceStoresPassTheSuite is the control: memstore, refStore and
// its session-based clients, without a bug, pass the suite in the same
// subprocess harness, and run (do not skip) the cases the mutants fail.
func TestReferenceStoresPassTheSuite(t *testing.T) {
	for _, store := range []string{"memstore", "reference", "session", "atomic", "sem", "rw", "rate", "idem"} {
		t.Run(store, func(t *testing.T) {
			out, err := runChild(t, store, 8*time.Second)
			if err != nil || len(failed(out)) > 0 || !strings.Contains(out, "--- PASS: TestMutantChild ") {
				t.Fatalf("%s: %v, failed %v:\n%s\n%s", store, err, failed(out), why(out), tail([]byte(out)))
			}
			var ran []string
			switch store {
			case "session":
				ran = []string{"SessionExtendRenews", "KilledSessionFreesItsKeys", "QueuerWaiterGetsKeyWhenHolderEnds", "RaceOneKeyNoOverlap",
					releaseEndedCase}
			case "reference":
				ran = []string{"RaceOneKeyNoOverlap", "NoSpuriousNotifications", "ExtendBatchIsASeriesOfExtend",
					"ListerListsHeldKeysOnly", "WaiterCounterCountsWaiters", "QueuerServesInOrder",
					"QueuerCancelledWaiterLeavesNothing", "QueuerWaiterGetsKeyWhenHolderEnds", "InspectMatchesTheState",
					"UnavailableIsNoAnswer", releaseEndedCase, "BreakerFreesTheKeyAndFencesKeepRising"}
			case "atomic":
				ran = []string{"QueueReaderReadsWhatTheHolderCommitted", "AtomicStepsAreOwnerChecked", "AtomicTransferReadsAndWrites"}
			case "memstore":
				// memstore does not batch renewals (the fallback's store)
				sem := slices.DeleteFunc(slices.Clone(semCases), func(c string) bool { return c == semBatchCase })
				rw := slices.DeleteFunc(slices.Clone(rwCases), func(c string) bool { return c == rwBatchCase })
				ran = slices.Concat(sem, rw, rateCases, idemCases, []string{metaCase})
			case "sem":
				ran = semCases
			case "rw":
				ran = rwCases
			case "rate":
				ran = rateCases
			case "idem":
				ran = idemCases
			}
			for _, c := range ran {
				if !strings.Contains(c, "/") {
					c = "Mutex/" + c
				}
				if !strings.Contains(out, "--- PASS: TestMutantChild/"+c+" ") {
					t.Errorf("reference: case %s did not run and pass", c)
				}
			}
		})
	}
}

// semCases are the semaphore cases the mutants fail, which the controls
// must run and pass.
var semCases = []string{"Semaphore/RaceNeverMoreThanTheLimit", "Semaphore/AcquireWithinTheLimit",
	"Semaphore/LimitMismatchChangesNothing", "Semaphore/ManyPermitsAllOrNothing", "Semaphore/EachHoldingExpiresOnItsOwn",
	"Semaphore/ExtendShorterShortensTheHolding", "Semaphore/FencesStrictlyIncrease", "Semaphore/ExtendKeepsOnlyThatHolding",
	"Semaphore/NotifiesOnReleaseOnly", "Semaphore/InspectMatchesTheState", "Semaphore/NoStateLeftAfterRetention",
	semBatchCase}

// semBatchCase is the case of driver.PermitBatchExtender, which memstore
// does not implement.
const semBatchCase = "Semaphore/BatchRenewsAsExtendDoes"

// rwCases are the read-write lock cases the mutants fail, and those of its
// capabilities, which the controls must run and pass.
var rwCases = []string{"RWMutex/WaitingWriterKeepsNewReadersOut", "RWMutex/WriterNotStarvedByOverlappingReaders",
	"RWMutex/EachReaderExpiresOnItsOwn", "RWMutex/RaceNoWriterWithAnyone", "RWMutex/ReadersShareTheKey",
	"RWMutex/FencesStrictlyIncrease", "RWMutex/DowngradeKeepsWritersOut", "RWMutex/UpgradeIsRefusedAtOnce",
	"RWMutex/NotifiesOnReleaseAndDowngradeOnly", "RWMutex/InspectMatchesTheState", "RWMutex/NoStateLeftAfterRetention",
	rwBatchCase}

// rwBatchCase is the case of driver.RWBatchExtender, which memstore does
// not implement.
const rwBatchCase = "RWMutex/BatchRenewsAsExtendDoes"

// rateCases are the rate limiter cases the mutants fail, which the
// controls must run and pass.
var rateCases = []string{"RateLimiter/DeniedChangesNothing", "RateLimiter/AdmitsTheBurstThenDenies",
	"RateLimiter/ManyAllOrNothing", "RateLimiter/RaceAdmitsAtMostTheBudget", "RateLimiter/IdleStateExpires",
	"RateLimiter/ClientsShareOneBudget"}

// idemCases are the idempotency cases the mutants fail, which the controls
// must run and pass.
var idemCases = []string{"Idempotency/StaleExecutorCannotComplete", "Idempotency/FingerprintMismatchChangesNothing",
	"Idempotency/TakeoverAfterTheLeaseHasAGreaterFence", "Idempotency/RetentionForgetsTheRecord",
	"Idempotency/RaceExactlyOneExecution", "Idempotency/ResentTakeoverBeginSaysTookOver"}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
