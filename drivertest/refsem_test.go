package drivertest_test

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// semMutant is memstore's Semaphore, and nothing else of it (so that only
// the semaphore suite runs), with one deliberate bug per semaphore
// mutation laid over it; without one it is the control.
type semMutant struct {
	m   *memstore.Store
	mut mutation
}

// The semaphore mutations: each breaks one rule of driver.Semaphore.
const (
	semNoLimit        mutation = "sem-no-limit"        // the limit is not enforced
	semMismatchAdmits mutation = "sem-mismatch-admits" // another n is admitted under the stored one
	semPartialGrant   mutation = "sem-partial-grant"   // k > 1 takes what is free
	semNoExpiry       mutation = "sem-no-expiry"       // holdings never end
	semFenceStuck     mutation = "sem-fence-stuck"     // every holding gets fence 1
	semSharedExpiry   mutation = "sem-shared-expiry"   // extending one holding extends all of the key's
	semBatchBlind     mutation = "sem-batch-blind"     // a batch renewal answers every request with the first one's result
)

var (
	_ driver.Semaphore           = semMutant{}
	_ driver.PermitNotifier      = semMutant{}
	_ driver.PermitInspector     = semMutant{}
	_ driver.PermitBatchExtender = semMutant{}
)

// noLimit is the limit the sem-no-limit mutant stores whatever it is asked.
const noLimit = 1 << 20

func newSemMutant(m mutation) semMutant { return semMutant{memstore.New(nil), m} }

func (s semMutant) Model() driver.Model { return s.m.Model() }

func (s semMutant) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	if err := driver.ValidatePermits(key, n, k, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	asked := ttl
	switch s.mut {
	case semNoLimit:
		n = noLimit
	case semNoExpiry:
		ttl = time.Hour
	}
	g, err := s.m.AcquirePermits(ctx, key, token, n, k, ttl)
	var le *driver.LimitMismatchError
	var pe *driver.PermitsTakenError
	switch {
	case s.mut == semMismatchAdmits && errors.As(err, &le):
		g, err = s.m.AcquirePermits(ctx, key, token, le.Stored, min(k, le.Stored), ttl)
	case s.mut == semPartialGrant && errors.As(err, &pe) && pe.Used < pe.Limit:
		g, err = s.m.AcquirePermits(ctx, key, token, n, pe.Limit-pe.Used, ttl)
		g.Permits = k // and says it gave what was asked
	}
	return s.fix(g, asked), err
}

// fix makes a grant say what the caller asked for, and applies
// sem-fence-stuck.
func (s semMutant) fix(g driver.PermitGrant, asked time.Duration) driver.PermitGrant {
	if g.Fence != 0 && s.mut == semFenceStuck {
		g.Fence = 1
	}
	if g.TTL != 0 {
		g.TTL = asked
	}
	return g
}

func (s semMutant) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	asked := ttl
	if s.mut == semNoExpiry && ttl > 0 {
		ttl = time.Hour
	}
	g, err := s.m.ExtendPermits(ctx, key, token, ttl)
	if err == nil && s.mut == semSharedExpiry {
		info, _ := s.m.InspectPermits(ctx, key)
		for _, h := range info.Holders {
			_, _ = s.m.ExtendPermits(ctx, key, h.Token, ttl)
		}
	}
	return s.fix(g, asked), err
}

// ExtendPermitsBatch calls ExtendPermits for each request, or (the
// sem-batch-blind mutant) answers them all with the first one's result.
func (s semMutant) ExtendPermitsBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	for i, q := range reqs {
		if i > 0 && s.mut == semBatchBlind {
			out[i] = out[0]
			continue
		}
		g, err := s.ExtendPermits(ctx, q.Key, q.Token, q.TTL)
		out[i] = driver.ExtendResult{Grant: driver.Grant{Fence: g.Fence, Holds: g.Permits, TTL: g.TTL}, Err: err}
	}
	return out
}

func (s semMutant) ReleasePermits(ctx context.Context, key, token string) error {
	return s.m.ReleasePermits(ctx, key, token)
}

func (s semMutant) SubscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return s.m.SubscribePermits(ctx, key)
}

func (s semMutant) InspectPermits(ctx context.Context, key string) (driver.PermitInfo, error) {
	info, err := s.m.InspectPermits(ctx, key)
	for i := range info.Holders {
		if s.mut == semFenceStuck {
			info.Holders[i].Fence = 1
		}
	}
	return info, err
}

// Retention and KeyState implement drivertest.StateReporter, as memstore's.
func (s semMutant) Retention() time.Duration { return s.m.Retention() }

func (s semMutant) KeyState(ctx context.Context, key string) (int, error) {
	return s.m.KeyState(ctx, key)
}
