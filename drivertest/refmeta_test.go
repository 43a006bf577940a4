package drivertest_test

import (
	"context"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// metaLastWins is the holder-metadata mutant: Inspect reports the latest
// metadata any Acquire of the key carried, whichever holding it came with
// (a re-entry overwrites it; a later holding without metadata shows an
// earlier holding's).
const metaLastWins mutation = "meta-last-wins"

// metaMutant is memstore with metaLastWins.
type metaMutant struct {
	*memstore.Store
	mu   sync.Mutex
	last map[string]string
}

func newMetaMutant() *metaMutant {
	return &metaMutant{Store: memstore.New(nil), last: map[string]string{}}
}

func (m *metaMutant) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := m.Store.Acquire(ctx, key, token, ttl)
	if meta := driver.MetaFrom(ctx); err == nil && meta != "" {
		m.mu.Lock()
		m.last[key] = meta
		m.mu.Unlock()
	}
	return g, err
}

func (m *metaMutant) Inspect(ctx context.Context, key string) (driver.Info, error) {
	info, err := m.Store.Inspect(ctx, key)
	if info.Held {
		m.mu.Lock()
		info.Meta = m.last[key]
		m.mu.Unlock()
	}
	return info, err
}
