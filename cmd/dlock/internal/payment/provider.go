// Package payment is the pay-twice demo: a payment service run as several
// HTTP instances over one Redis (the embedded server by default), a fake
// payment provider that counts what it charges, and a client that clicks
// "pay" twice or retries after its instance died. Each strategy runs on
// fresh instances; the provider's counts say whether an order was charged
// once, twice or never.
package payment

import (
	"sync"
	"time"
)

// Provider is the fake payment provider: it charges each idempotency key
// once (as Stripe does) and counts every attempt. It is safe for
// concurrent use.
type Provider struct {
	// Latency is how long a charge takes: long enough for a second click
	// to arrive while the first is being charged.
	Latency time.Duration

	mu       sync.Mutex
	attempts map[string]int    // order -> charge calls
	charges  map[string]string // idempotency key -> order
}

// NewProvider returns a provider whose charges take latency.
func NewProvider(latency time.Duration) *Provider {
	return &Provider{Latency: latency, attempts: map[string]int{}, charges: map[string]string{}}
}

// Charge charges order under key, after the provider's latency; a key it
// has charged before is not charged again. It reports whether this call
// charged.
func (p *Provider) Charge(order, key string) bool {
	if p.Latency > 0 {
		time.Sleep(p.Latency) // the provider's own time, not a synchronisation
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts[order]++
	if _, ok := p.charges[key]; ok {
		return false
	}
	p.charges[key] = order
	return true
}

// counts returns, for orders, the charge attempts and the charges of each.
func (p *Provider) counts(orders []string) (attempts, charges map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	attempts, charges = map[string]int{}, map[string]int{}
	for _, o := range orders {
		attempts[o] = p.attempts[o]
	}
	for _, o := range p.charges {
		charges[o]++
	}
	return attempts, charges
}
