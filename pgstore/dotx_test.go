package pgstore_test

import (
	"testing"

	"example.com/dlock/internal/sqltest"
)

// The SQL mode of the idempotency guard (pgguard.DoTx), checked by the
// SQL stores' shared kit (internal/sqltest) on the package's server; each
// check has its negative control (see the kit).

func TestDoTxTwentyCallsChargeOnce(t *testing.T) { sqltest.TwentyCallsChargeOnce(t, pgBackend{}) }

func TestDoTxExecutorKilledBeforeCommitChargesOnce(t *testing.T) {
	sqltest.KilledBeforeCommit(t, pgBackend{})
}

func TestDoTxDuplicateIsInFlightAtOnce(t *testing.T) { sqltest.InFlightAtOnce(t, pgBackend{}) }

func TestDoTxPausedExecutorIsBounded(t *testing.T) { sqltest.PausedExecutorIsBounded(t, pgBackend{}) }

func TestDoTxFoldedMeetsTheOtherModes(t *testing.T) { sqltest.FoldedMeetsTheOtherModes(t, pgBackend{}) }

func TestDoTxStaleExecutorRollsBack(t *testing.T) { sqltest.StaleExecutorRollsBack(t, pgBackend{}) }

func TestDoTxRoundTrips(t *testing.T) { sqltest.RoundTrips(t, pgBackend{}) }

// BenchmarkDoTx: one business insert per request in a plain transaction
// and in DoTx, folded and two-step.
func BenchmarkDoTx(b *testing.B) { sqltest.Bench(b, pgBackend{}) }
