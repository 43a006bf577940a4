package drivertest_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// idemMutant is memstore's Idempotency, and nothing else of it (so that
// only the idempotency suite runs), with one deliberate bug per
// idempotency mutation laid over it; without one it is the control. The
// suite's clients all share one idemMutant (TestMutantChild), so it sees
// every executor: a mutation that lets a caller act as an executor it is
// not makes the call as the record's real owner.
type idemMutant struct {
	m   *memstore.Store
	mut mutation

	mu    sync.Mutex
	owner map[driver.RecordID]execution // the executor memstore knows
	as    map[execution]execution       // a caller made an executor: who it acts as
	first map[driver.RecordID]uint64    // the first fence issued per record (idem-fence-stuck)
}

type execution struct {
	token string
	fence uint64
}

// The idempotency mutations: each breaks one rule of driver.Idempotency.
const (
	idemNoFenceCheck    mutation = "idem-no-fence-check"   // CompleteRecord by a stale executor overwrites
	idemNoFingerprint   mutation = "idem-no-fingerprint"   // another request's fingerprint is accepted
	idemFenceStuck      mutation = "idem-fence-stuck"      // a takeover keeps the record's first fence
	idemNoExpiry        mutation = "idem-no-expiry"        // an in-flight lease never passes
	idemNoExclusion     mutation = "idem-no-exclusion"     // a caller of an in-flight record executes too
	idemForgetsTakeover mutation = "idem-forgets-takeover" // a resent begin of a takeover says TookOver false
)

var _ driver.Idempotency = (*idemMutant)(nil)

func newIdemMutant(m mutation) *idemMutant {
	return &idemMutant{m: memstore.New(nil), mut: m, owner: map[driver.RecordID]execution{},
		as: map[execution]execution{}, first: map[driver.RecordID]uint64{}}
}

func (s *idemMutant) Model() driver.Model { return s.m.Model() }

func (s *idemMutant) BeginRecord(ctx context.Context, id driver.RecordID, token, fp string, lease, keep time.Duration) (driver.RecordBegin, error) {
	if err := driver.ValidateRecord(id, token, fp, lease, keep); err != nil {
		return driver.RecordBegin{}, err
	}
	switch s.mut {
	case idemNoFingerprint:
		fp = ""
	case idemNoExpiry:
		lease = time.Hour
	}
	b, err := s.m.BeginRecord(ctx, id, token, fp, lease, keep)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil:
	case b.State == driver.RecordStarted:
		if s.mut == idemForgetsTakeover && s.owner[id] == (execution{token, b.Fence}) {
			b.TookOver = false // the answer of a record that forgot it
		}
		s.owner[id] = execution{token, b.Fence}
		if _, ok := s.first[id]; !ok || !b.TookOver {
			s.first[id] = b.Fence
		}
		if s.mut == idemFenceStuck {
			s.as[execution{token, s.first[id]}] = execution{token, b.Fence}
			b.Fence = s.first[id]
		}
	case b.State == driver.RecordInFlight && s.mut == idemNoExclusion:
		s.as[execution{token, b.Fence}] = s.owner[id]
		b.State, b.Remaining = driver.RecordStarted, lease
	}
	return b, err
}

// real returns who the caller acts as in memstore.
func (s *idemMutant) real(token string, fence uint64) (string, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.as[execution{token, fence}]; ok {
		return e.token, e.fence
	}
	return token, fence
}

func (s *idemMutant) CompleteRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, res []byte) error {
	tok, f := s.real(token, fence)
	err := s.m.CompleteRecord(ctx, id, tok, f, res)
	if s.mut == idemNoFenceCheck && errors.Is(err, driver.ErrStaleFence) {
		s.mu.Lock()
		o, ok := s.owner[id]
		s.mu.Unlock()
		if ok {
			return s.m.CompleteRecord(ctx, id, o.token, o.fence, res)
		}
	}
	return err
}

func (s *idemMutant) AbandonRecord(ctx context.Context, id driver.RecordID, token string, fence uint64) error {
	tok, f := s.real(token, fence)
	return s.m.AbandonRecord(ctx, id, tok, f)
}

func (s *idemMutant) ExtendRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, lease time.Duration) error {
	if s.mut == idemNoExpiry && lease > 0 {
		lease = time.Hour
	}
	tok, f := s.real(token, fence)
	return s.m.ExtendRecord(ctx, id, tok, f, lease)
}

// Retention and KeyState implement drivertest.StateReporter, as memstore's.
func (s *idemMutant) Retention() time.Duration { return s.m.Retention() }

func (s *idemMutant) KeyState(ctx context.Context, key string) (int, error) {
	return s.m.KeyState(ctx, key)
}
