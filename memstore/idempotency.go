package memstore

import (
	"bytes"
	"context"
	"time"

	"example.com/dlock/driver"
)

// The idempotency records: one per driver.RecordID, in flight (a token's
// lease with a fence from the store's one counter) or completed (a copy of
// the result). A record is dropped once forgotten (see forgets), swept as
// the store is used, as expired locks are.

var _ driver.Idempotency = (*Store)(nil)

// idemState is the store's Idempotency state; its map is made on first
// use.
type idemState struct {
	recs    map[driver.RecordID]*idemRecord
	sweepAt int // sweep forgotten records when len(recs) reaches it
}

type idemRecord struct {
	done        bool // completed
	took        bool // the token's execution took the record over
	token       string
	fence       uint64
	fingerprint string
	leaseEnds   time.Time // in flight: when another may take over
	keep        time.Duration
	forgets     time.Time // when the record is dropped
	result      []byte
}

// idemLive returns id's record, dropping it if forgotten. Called with s.mu
// held.
func (s *Store) idemLive(id driver.RecordID) *idemRecord {
	r := s.idem.recs[id]
	if r != nil && !s.now().Before(r.forgets) {
		delete(s.idem.recs, id)
		return nil
	}
	return r
}

// idemSweep drops forgotten records once the map has doubled since the
// last sweep. Called with s.mu held.
func (s *Store) idemSweep() {
	if len(s.idem.recs) < s.idem.sweepAt {
		return
	}
	for id := range s.idem.recs {
		s.idemLive(id)
	}
	s.idem.sweepAt = max(64, 2*len(s.idem.recs))
}

// BeginRecord implements driver.Idempotency: with no record, or over an
// in-flight one whose lease has passed, token starts an execution with a
// new fence from the store's counter (TookOver in the latter case; a resent
// Begin of the executor answers as its first did); otherwise it learns the live
// executor's lease or the stored result (a copy). A fingerprint other than
// the record's is a *driver.FingerprintMismatchError. Bad arguments match
// driver.ErrInvalid; a done ctx returns its error; both change nothing.
func (s *Store) BeginRecord(ctx context.Context, id driver.RecordID, token, fingerprint string, lease, retention time.Duration) (driver.RecordBegin, error) {
	if err := driver.ValidateRecord(id, token, fingerprint, lease, retention); err != nil {
		return driver.RecordBegin{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.RecordBegin{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r := s.idemLive(id)
	switch {
	case r == nil:
		s.idemSweep()
		if s.idem.recs == nil {
			s.idem.recs = make(map[driver.RecordID]*idemRecord)
		}
		r = &idemRecord{fingerprint: fingerprint}
		s.idem.recs[id] = r
	case r.fingerprint != fingerprint:
		st := driver.RecordInFlight
		if r.done {
			st = driver.RecordCompleted
		}
		return driver.RecordBegin{}, &driver.FingerprintMismatchError{State: st}
	case r.done:
		return driver.RecordBegin{State: driver.RecordCompleted, Fence: r.fence, Remaining: r.forgets.Sub(now), Result: bytes.Clone(r.result)}, nil
	case r.token == token: // a resent Begin
		r.leaseEnds = later(r.leaseEnds, now.Add(lease))
		r.forgets = later(r.forgets, r.leaseEnds.Add(r.keep))
		return driver.RecordBegin{State: driver.RecordStarted, Fence: r.fence, TookOver: r.took, Remaining: r.leaseEnds.Sub(now)}, nil
	case now.Before(r.leaseEnds):
		return driver.RecordBegin{State: driver.RecordInFlight, Fence: r.fence, Remaining: r.leaseEnds.Sub(now)}, nil
	}
	took := r.token != ""
	s.fence++
	r.token, r.fence, r.keep, r.took = token, s.fence, retention, took
	r.leaseEnds = now.Add(lease)
	r.forgets = r.leaseEnds.Add(retention)
	return driver.RecordBegin{State: driver.RecordStarted, Fence: r.fence, TookOver: took, Remaining: lease}, nil
}

// idemOwned returns id's record if token and fence own it in flight, else the
// stale-executor error. Called with s.mu held.
func (s *Store) idemOwned(id driver.RecordID, token string, fence uint64) (*idemRecord, error) {
	r := s.idemLive(id)
	switch {
	case r == nil:
		return nil, driver.StaleExecutor(false)
	case r.done || r.token != token || r.fence != fence:
		return r, driver.StaleExecutor(true)
	}
	return r, nil
}

// CompleteRecord implements driver.Idempotency: a copy of result becomes
// id's answer, kept for the record's retention from now, if token and
// fence own the in-flight record (its lease may have passed if nobody took
// it over); done again by them it answers nil. Otherwise, and for bad
// arguments or a done ctx, it changes nothing.
func (s *Store) CompleteRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, result []byte) error {
	if err := driver.ValidateRecordCall(id, token, 1); err != nil {
		return err
	}
	if err := driver.ValidateResult(result); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.idemOwned(id, token, fence)
	if r != nil && r.done && r.token == token && r.fence == fence {
		return nil // resent
	}
	if err != nil {
		return err
	}
	r.done, r.result = true, bytes.Clone(result)
	r.forgets = s.now().Add(r.keep)
	return nil
}

// AbandonRecord implements driver.Idempotency: id's in-flight record is
// dropped if token and fence own it.
func (s *Store) AbandonRecord(ctx context.Context, id driver.RecordID, token string, fence uint64) error {
	if err := driver.ValidateRecordCall(id, token, 1); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.idemOwned(id, token, fence); err != nil {
		return err
	}
	delete(s.idem.recs, id)
	return nil
}

// ExtendRecord implements driver.Idempotency: the lease of id's in-flight
// record ends lease from now if token and fence own it.
func (s *Store) ExtendRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, lease time.Duration) error {
	if err := driver.ValidateRecordCall(id, token, lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.idemOwned(id, token, fence)
	if err != nil {
		return err
	}
	r.leaseEnds = s.now().Add(lease)
	r.forgets = r.leaseEnds.Add(r.keep)
	return nil
}

// idemEntries is how many records the store keeps for key, in any scope.
// Called with s.mu held.
func (s *Store) idemEntries(key string) int {
	n := 0
	for id := range s.idem.recs {
		if id.Key == key && s.idemLive(id) != nil {
			n++
		}
	}
	return n
}
