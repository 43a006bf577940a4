package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// sweepBatch bounds the rows one sweep statement deletes, so that a sweep
// never holds many row locks or advisory locks (one per row: they share the
// server's lock table, max_locks_per_transaction × connections) or runs
// long; a sweep repeats it up to sweepRounds times while batches come back
// full.
const sweepBatch, sweepRounds = 100, 1000

// startSweep starts the store's sweep goroutine on the first Acquire (New
// does no I/O and starts nothing). It runs until Close.
func (s *Store) startSweep() {
	if s.sweep < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sweepStop != nil || s.closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.sweepStop, s.sweepDone = cancel, make(chan struct{})
	go s.sweepLoop(ctx, s.sweepDone)
}

// sweepLoop sweeps every interval until ctx ends (Close).
func (s *Store) sweepLoop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, max(s.sweep, 10*time.Second))
		_, _ = s.Sweep(sctx) // a failed sweep is retried at the next tick
		cancel()
	}
}

// Sweep deletes free rows (of keys released, or whose lease ended),
// expired holdings of permits and of read-write locks (and marks), forgotten idempotency records and rate limiter keys whose TAT has passed, in batches of at most 100 rows, skipping rows other statements hold
// locked and keys an Acquire is inserting, and returns how many it deleted. The store calls it every
// Options.SweepInterval; call it yourself when the store does not sweep
// (a negative interval). Safe to run from many stores at once. An error
// matching no sentinel means the database did not answer; the rows
// deleted before it are counted.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var total int64
	for range sweepRounds {
		n, err := s.db.exec(ctx, s.sql.sweep, sweepBatch)
		total += n
		if err != nil {
			return total, wrap("sweep", err)
		}
		if n < sweepBatch {
			break
		}
	}
	n, err := s.sweepPermits(ctx)
	if total += n; err != nil {
		return total, err
	}
	n, err = s.sweepRecords(ctx)
	if total += n; err != nil {
		return total, err
	}
	n, err = s.sweepRates(ctx)
	if total += n; err != nil {
		return total, err
	}
	n, err = s.sweepRW(ctx)
	return total + n, err
}

// sweepRecords deletes forgotten idempotency records in batches, as Sweep
// does for the lease table. A schema without the records table (made
// before it, not migrated again) has nothing to sweep.
func (s *Store) sweepRecords(ctx context.Context) (int64, error) {
	var total int64
	for range sweepRounds {
		n, err := s.db.exec(ctx, s.rsql.sweep, sweepBatch)
		total += n
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
			return total, nil
		}
		if err != nil {
			return total, wrap("sweep records", err)
		}
		if n < sweepBatch {
			break
		}
	}
	return total, nil
}
