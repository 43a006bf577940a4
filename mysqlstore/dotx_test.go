package mysqlstore_test

import (
	"testing"

	"example.com/dlock/internal/sqltest"
)

// The SQL mode of the idempotency guard (myguard.DoTx), checked by the
// SQL stores' shared kit (internal/sqltest) on the package's server; each
// check has its negative control (see the kit).

func TestDoTxTwentyCallsChargeOnce(t *testing.T) { sqltest.TwentyCallsChargeOnce(t, myBackend{}) }

func TestDoTxExecutorKilledBeforeCommitChargesOnce(t *testing.T) {
	sqltest.KilledBeforeCommit(t, myBackend{})
}

func TestDoTxDuplicateIsInFlightAtOnce(t *testing.T) { sqltest.InFlightAtOnce(t, myBackend{}) }

func TestDoTxPausedExecutorIsBounded(t *testing.T) { sqltest.PausedExecutorIsBounded(t, myBackend{}) }

func TestDoTxFoldedMeetsTheOtherModes(t *testing.T) { sqltest.FoldedMeetsTheOtherModes(t, myBackend{}) }

func TestDoTxStaleExecutorRollsBack(t *testing.T) { sqltest.StaleExecutorRollsBack(t, myBackend{}) }

func TestDoTxRoundTrips(t *testing.T) { sqltest.RoundTrips(t, myBackend{}) }

// BenchmarkDoTx: one business insert per request in a plain transaction
// and in DoTx, folded and two-step (interpolateParams=true).
func BenchmarkDoTx(b *testing.B) { sqltest.Bench(b, myBackend{}) }
