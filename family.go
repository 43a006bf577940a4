package dlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// famCore is the machinery that the lock family's primitives other than
// the Client (Semaphores, RWLocks) share: their configuration, the
// holdings they hand out (member) that Close releases, the background
// give-backs of what the store did not confirm, and Close. Each primitive
// embeds one and sets its words and its store's release.
type famCore struct {
	noun      string   // the primitive, in messages: "semaphore"
	errClosed error    // what calls after Close fail with (ErrInvalid)
	fs        famStore // the store, as the shared machinery calls it
	model     driver.Model
	cfg       config
	notifier  driver.Notifier // the store's notifier as the Pacer wants it; nil if none
	renewer   *lease.Renewer[Timer]

	mu      sync.Mutex
	held    map[*member]struct{} // live holdings, released by Close
	closed  atomic.Bool
	closing chan struct{}      // closed by Close: ends waits' sleeps
	bg      bgState            // background give-backs
	bgCtx   context.Context    // their context, cancelled if Close's ends first
	bgStop  context.CancelFunc // cancels bgCtx
}

// famStore is a primitive's store as the shared machinery calls it: its
// token-checked release and extend of one holding, and its notifier.
type famStore interface {
	Model() driver.Model
	release(ctx context.Context, key, token string) error
	extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error)
	notifier() driver.Notifier // nil if the store does not notify
}

// init sets f up for the primitive noun on fs with the default options
// opts; calls after Close fail with errClosed. It returns an error matching
// ErrInvalid, before any I/O, if an option is out of range or does not
// apply.
func (f *famCore) init(noun string, errClosed error, fs famStore, opts []Option) error {
	f.noun, f.errClosed, f.fs, f.model = noun, errClosed, fs, fs.Model()
	cfg := defaultConfig()
	cfg.ttl = defaultTTL(f.model)
	for _, o := range opts {
		o(&cfg)
	}
	if err := f.validate(&cfg); err != nil {
		return err
	}
	f.cfg, f.notifier = cfg, fs.notifier()
	f.held = make(map[*member]struct{})
	f.closing = make(chan struct{})
	f.renewer = lease.NewRenewer[Timer](cfg.clock, famExtender{fs})
	f.bgCtx, f.bgStop = context.WithCancel(context.Background())
	return nil
}

// validate checks cfg as a Client's and refuses what does not apply to the
// primitive (WithRead), fitting the TTL to the store's model.
func (f *famCore) validate(cfg *config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.read != nil {
		return invalidf("WithRead does not apply to a %s", f.noun)
	}
	return fitModel(f.model, &cfg.ttl)
}

// callConfig checks a call's context and options before any I/O and
// returns its configuration: the defaults with opts applied.
func (f *famCore) callConfig(ctx context.Context, opts []Option) (config, error) {
	if ctx == nil {
		return config{}, invalidf("nil context")
	}
	if f.closed.Load() {
		return config{}, f.errClosed
	}
	cfg := f.cfg
	for _, o := range opts {
		o(&cfg)
	}
	if len(opts) > 0 {
		if err := f.validate(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// extendTTL checks the ttl of an Extend as the defaults' are checked and
// returns it fitted to the store's model.
func (f *famCore) extendTTL(ttl time.Duration) (time.Duration, error) {
	cfg := config{ttl: ttl, wait: -1, backoff: f.cfg.backoff, clock: f.cfg.clock}
	if err := f.validate(&cfg); err != nil {
		return 0, err
	}
	return cfg.ttl, nil
}

// failed ends a wait with err, first giving back in the background what an
// attempt without an answer may have left to token.
func (f *famCore) failed(key, token string, unsure bool, cfg config, err error) error {
	if unsure {
		f.giveBack(key, token, cfg.ttl, time.Time{}, nil)
	}
	return err
}

// giveBack releases token's holding of key in the background, not before
// notBefore, retrying a release without an answer with backoff until the
// store confirms or says the token holds nothing, for at most the lease
// (by then the holding has expired anyway); then it calls done if not nil.
// Close waits for it.
func (f *famCore) giveBack(key, token string, ttl time.Duration, notBefore time.Time, done func()) {
	clk := f.cfg.clock
	wait := max(0, notBefore.Sub(clk.Now()))
	f.bg.goCounted(func() {
		if done != nil {
			defer done()
		}
		ctx, cancel := context.WithTimeout(f.bgCtx, wait+max(ttl, time.Second))
		defer cancel()
		if wait > 0 && !sleep(ctx, clk, wait, nil) {
			return
		}
		for fails := 1; ; fails++ {
			err := classify(f.fs.release(ctx, key, token))
			if err == nil || isNotHeld(err) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused) {
				return
			}
			if !sleep(ctx, clk, giveBackRetry(fails), nil) {
				return
			}
		}
	})
}

// close is the primitives' Close: it releases every holding still held,
// ends the waits, and waits for the background give-backs, cancelling them
// if ctx ends first. It returns the first release error, or ctx's; a
// second call returns nil.
func (f *famCore) close(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	if f.closed.Swap(true) {
		return nil
	}
	close(f.closing)
	f.mu.Lock()
	held := make([]*member, 0, len(f.held))
	for m := range f.held {
		held = append(held, m)
	}
	f.mu.Unlock()
	var first error
	for _, m := range held {
		if err := m.release(ctx); err != nil && first == nil && !isNotHeld(err) {
			first = err
		}
	}
	select {
	case <-f.bg.drained():
	case <-ctx.Done():
		f.bgStop()
		<-f.bg.drained()
		if first == nil {
			first = ctx.Err()
		}
	}
	f.bgStop()
	return first
}

// bgState counts background goroutines (give-backs, clean-ups), for Close
// to wait for.
type bgState struct {
	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed when pending drops to 0, if made
}

// goCounted runs f in its own goroutine, counted until it returns.
func (b *bgState) goCounted(f func()) {
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
	go func() {
		defer func() {
			b.mu.Lock()
			if b.pending--; b.pending == 0 && b.idle != nil {
				close(b.idle)
				b.idle = nil
			}
			b.mu.Unlock()
		}()
		f()
	}()
}

// drained returns a channel closed once no counted goroutine runs.
func (b *bgState) drained() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == 0 {
		return closedChan
	}
	if b.idle == nil {
		b.idle = make(chan struct{})
	}
	return b.idle
}

// famExtender is a famCore's side of renewal (lease.Extender): one
// pipelined round trip when the store batches the primitive's renewals and
// more than one holding is due, else one extend per holding, all at once
// (fanOut), as the Client's extender does.
type famExtender struct{ fs famStore }

// famBatcher is a famStore whose store may renew many holdings in one
// round trip: extendBatch returns nil if it does not.
type famBatcher interface {
	extendBatch() func(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult
}

// ExtendMany implements lease.Extender.
func (e famExtender) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	if b, ok := e.fs.(famBatcher); ok && len(reqs) > 1 {
		if batch := b.extendBatch(); batch != nil {
			return batch(ctx, reqs)
		}
	}
	results := make([]driver.ExtendResult, len(reqs))
	fanOut(len(reqs), func(i int) {
		q := reqs[i]
		results[i].Grant, results[i].Err = e.fs.extend(ctx, q.Key, q.Token, q.TTL)
	})
	return results
}

// fanOut calls f(i) for every i in [0, n), all at once (the first on the
// caller's goroutine), and returns when every call has: renewals fan out
// so that a hung call holds up no other.
func fanOut(n int, f func(i int)) {
	if n == 0 {
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { f(i) })
	}
	f(0)
	wg.Wait()
}
