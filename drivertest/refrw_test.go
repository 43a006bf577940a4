package drivertest_test

import (
	"context"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// rwMutant is memstore's RWMutex, and nothing else of it (so that only the
// read-write lock suite runs), with one deliberate bug per read-write lock
// mutation laid over it; without one it is the control.
type rwMutant struct {
	m   *memstore.Store
	mut mutation

	mu      sync.Mutex
	phantom map[[2]string]string // rw-writer-with-reader: (key, token) -> the key its write holds
}

// The read-write lock mutations: each breaks one rule of driver.RWMutex.
const (
	rwIgnoresMark    mutation = "rw-ignores-mark"       // a refused writer leaves no mark: readers keep joining
	rwSharedExpiry   mutation = "rw-shared-expiry"      // extending one holding extends all of the key's
	rwWriterWithRead mutation = "rw-writer-with-reader" // a writer is admitted while readers hold the key
	rwFenceStuck     mutation = "rw-fence-stuck"        // every holding gets fence 1
	rwDowngradeFrees mutation = "rw-downgrade-frees"    // a downgrade ends the holding (CURATOR-621)
	rwUpgradeWaits   mutation = "rw-upgrade-waits"      // an upgrade is refused as taken, so its caller waits
	rwBatchBlind     mutation = "rw-batch-blind"        // a batch renewal answers every request with the first one's result
)

var (
	_ driver.RWMutex     = (*rwMutant)(nil)
	_ driver.RWNotifier  = (*rwMutant)(nil)
	_ driver.RWInspector = (*rwMutant)(nil)

	_ driver.RWBatchExtender = (*rwMutant)(nil)
)

func newRWMutant(m mutation) *rwMutant {
	return &rwMutant{m: memstore.New(nil), mut: m, phantom: map[[2]string]string{}}
}

func (s *rwMutant) Model() driver.Model { return s.m.Model() }

// holding returns the mode token holds key in (0: none) and the key's info.
func (s *rwMutant) holding(ctx context.Context, key, token string) (driver.RWMode, driver.RWInfo) {
	info, _ := s.m.InspectRW(ctx, key)
	for _, h := range info.Holders {
		if h.Token == token {
			return h.Mode, info
		}
	}
	return 0, info
}

func (s *rwMutant) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if s.mut == rwDowngradeFrees && driver.ValidateRW(key, ttl) == nil {
		if mode, info := s.holding(ctx, key, token); mode == driver.RWWrite {
			_ = s.m.ReleaseRW(ctx, key, token)
			return driver.RWGrant{Mode: driver.RWRead, Fence: info.Holders[0].Fence, Readers: 1, TTL: ttl}, nil
		}
	}
	g, err := s.m.AcquireRead(ctx, key, token, ttl)
	return s.fix(g), err
}

func (s *rwMutant) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if driver.ValidateRW(key, ttl) != nil || ctx.Err() != nil {
		return s.m.AcquireWrite(ctx, key, token, ttl)
	}
	mode, info := s.holding(ctx, key, token)
	switch {
	case s.mut == rwUpgradeWaits && mode == driver.RWRead:
		return driver.RWGrant{}, &driver.RWTakenError{Held: driver.RWRead, Readers: len(info.Holders), Remaining: -1}
	case s.mut == rwIgnoresMark && mode == 0 && len(info.Holders) > 0:
		return driver.RWGrant{}, &driver.RWTakenError{Held: info.Mode, Readers: len(info.Holders), Remaining: -1}
	case s.mut == rwWriterWithRead && mode == 0 && info.Mode == driver.RWRead:
		g, err := s.m.AcquireWrite(ctx, key+"/phantom", token, ttl)
		if err == nil {
			s.mu.Lock()
			s.phantom[[2]string{key, token}] = key + "/phantom"
			s.mu.Unlock()
		}
		return g, err
	}
	g, err := s.m.AcquireWrite(ctx, key, token, ttl)
	return s.fix(g), err
}

// fix applies rw-fence-stuck to a grant.
func (s *rwMutant) fix(g driver.RWGrant) driver.RWGrant {
	if g.Fence != 0 && s.mut == rwFenceStuck {
		g.Fence = 1
	}
	return g
}

// real returns the key token's holding of key is kept under.
func (s *rwMutant) real(key, token string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.phantom[[2]string{key, token}]; ok {
		return k
	}
	return key
}

func (s *rwMutant) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	g, err := s.m.ExtendRW(ctx, s.real(key, token), token, ttl)
	if err == nil && s.mut == rwSharedExpiry {
		info, _ := s.m.InspectRW(ctx, key)
		for _, h := range info.Holders {
			_, _ = s.m.ExtendRW(ctx, key, h.Token, ttl)
		}
	}
	return s.fix(g), err
}

// ExtendRWBatch calls ExtendRW for each request, or (the rw-batch-blind
// mutant) answers them all with the first one's result.
func (s *rwMutant) ExtendRWBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	for i, q := range reqs {
		if i > 0 && s.mut == rwBatchBlind {
			out[i] = out[0]
			continue
		}
		g, err := s.ExtendRW(ctx, q.Key, q.Token, q.TTL)
		out[i] = driver.ExtendResult{Grant: driver.Grant{Fence: g.Fence, Holds: 1, TTL: g.TTL}, Err: err}
	}
	return out
}

func (s *rwMutant) ReleaseRW(ctx context.Context, key, token string) error {
	return s.m.ReleaseRW(ctx, s.real(key, token), token)
}

func (s *rwMutant) SubscribeRW(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return s.m.SubscribeRW(ctx, key)
}

func (s *rwMutant) InspectRW(ctx context.Context, key string) (driver.RWInfo, error) {
	info, err := s.m.InspectRW(ctx, key)
	for i := range info.Holders {
		if s.mut == rwFenceStuck {
			info.Holders[i].Fence = 1
		}
	}
	return info, err
}

// Retention and KeyState implement drivertest.StateReporter, as memstore's.
func (s *rwMutant) Retention() time.Duration { return s.m.Retention() }

func (s *rwMutant) KeyState(ctx context.Context, key string) (int, error) {
	return s.m.KeyState(ctx, key)
}
