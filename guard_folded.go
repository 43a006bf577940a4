package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// BeginFunc begins an idempotency record as driver.Idempotency's
// BeginRecord does, but inside a database transaction that it opens and,
// when the answer is RecordStarted, leaves open for the function that
// DoFolded runs next; on any other answer or an error it has ended the
// transaction (rolled back). pgguard and myguard make these.
type BeginFunc func(ctx context.Context, id driver.RecordID, token, fingerprint string, lease, retention time.Duration) (driver.RecordBegin, error)

// DoFolded is DoTx with the record's begin in fn's transaction: begin
// opens the transaction and begins the record in it; fn writes, completes
// the record and commits there. DoFolded neither renews nor abandons the
// record (the transaction holds it; its end removes it), and fn's ctx is
// ctx. If fn returns an error it must have rolled back; an error matching
// ErrStaleFence gains ErrLost. Replays, in-flight answers, waits (polling
// begin), resends, mismatches and invalid arguments are as for Do; a nil
// begin is ErrInvalid before any I/O. pgguard.DoTx and myguard.DoTx use it.
func (g *Guard) DoFolded(ctx context.Context, key, fingerprint string, begin BeginFunc, fn func(context.Context, Execution) ([]byte, error)) (Result, error) {
	if begin == nil {
		return Result{}, invalidf("nil begin function")
	}
	return g.do(ctx, key, fingerprint, runMode{inTx: true, folded: begin}, fn)
}

// executeFolded runs fn as the executor of id (b: its begin's answer) in
// the transaction begin left open; fn completes and commits (DoFolded).
func (g *Guard) executeFolded(ctx context.Context, id driver.RecordID, b driver.RecordBegin, fn func(context.Context, Execution) ([]byte, error)) (res Result, err error) {
	done := false
	var ran time.Duration
	defer func() { // reports how the call ended, once fn has run or panicked
		if g.cfg.obs != nil {
			g.result(ctx, id.Key, runOutcome(done, b.TookOver, res, err), b.Fence, ran, err)
		}
	}()
	start := g.cfg.clock.Now()
	val, err := fn(ctx, Execution{Scope: id.Scope, Key: id.Key, Fence: b.Fence, TookOver: b.TookOver})
	ran, done = g.cfg.clock.Now().Sub(start), true
	if err != nil {
		if errors.Is(err, ErrStaleFence) {
			err = tidy(fmt.Errorf("%w: idempotency key %q: the execution was taken over and its transaction not committed: %w", ErrLost, id.Key, err))
		}
		return Result{}, err
	}
	return Result{Value: val, Fence: b.Fence}, nil
}
