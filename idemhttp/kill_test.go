package idemhttp_test

import (
	"context"
	"testing"

	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/idemtest"
	"example.com/dlock/internal/redisserver"
)

// roles.Run runs the payer role from init when this binary is the child
// of TestExecutorCrashAfterTheChargeChargesOnce.
var roles = faulttest.NewRoles("IDEMHTTP_CHILD_ROLE")

func init() { roles.Run() }

var _ = roles.Register("payer", idemtest.Payer)

// TestExecutorCrashAfterTheChargeChargesOnce (idemtest.CrashAfterCharge),
// on one Redis server and on a Cluster: the executor, a child process
// opened on the store's URL, killed or paused after its charge, is taken
// over by a retry that charges with the same derived key: one charge; the
// paused executor, resumed, cannot store its result. Control: a charge
// keyed by the fence charges twice. Not on memstore: it lives in one
// process, so there is no other process to kill.
func TestExecutorCrashAfterTheChargeChargesOnce(t *testing.T) {
	start := func(t testing.TB, ctx context.Context, env ...string) *faulttest.Child {
		return roles.Start(t, ctx, "payer", env...)
	}
	t.Run("redis", func(t *testing.T) { idemtest.CrashAfterCharge(t, redisserver.Start(t).URL(), start) })
	t.Run("redis-cluster", func(t *testing.T) { idemtest.CrashAfterCharge(t, clusterURL(t), start) })
}
