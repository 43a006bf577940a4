package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// rwFault wraps an RWMutex store (memstore: it needs its RWInspector),
// counts calls, can fail ExtendRW or every call and, as negative controls,
// break a rule of the contract. It has no Unwrap: it hides the store's
// RWNotifier, so waiters pace. rwNotify lets the notifier through.
type rwFault struct {
	*memstore.Store
	calls   atomic.Int64
	failExt atomic.Bool
	down    atomic.Bool // every call fails, unsent
	// Negative controls.
	ignoreWriter   bool // a write is asked for as a read: writers share the key
	noMark         bool // a refused writer leaves no writer-waiting mark
	endOnDowngrade bool // a downgrade ends the holding (CURATOR-621)
}

func newRWFault() *rwFault { return &rwFault{Store: memstore.New(nil)} }

func (f *rwFault) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return driver.RWGrant{}, errDown
	}
	if f.endOnDowngrade {
		if h, ok := f.holding(key, token); ok && h.Mode == driver.RWWrite {
			_ = f.Store.ReleaseRW(ctx, key, token)
			return driver.RWGrant{Mode: driver.RWRead, Fence: h.Fence, Readers: 1, TTL: ttl}, nil
		}
	}
	return f.Store.AcquireRead(ctx, key, token, ttl)
}

func (f *rwFault) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return driver.RWGrant{}, errDown
	}
	if f.ignoreWriter {
		return f.Store.AcquireRead(ctx, key, token, ttl)
	}
	if f.noMark {
		if info, _ := f.Store.InspectRW(ctx, key); len(info.Holders) > 0 {
			return driver.RWGrant{}, &driver.RWTakenError{Held: info.Mode, Readers: len(info.Holders), Remaining: -1}
		}
	}
	return f.Store.AcquireWrite(ctx, key, token, ttl)
}

// holding returns token's holding of key as the store has it.
func (f *rwFault) holding(key, token string) (driver.RWHolder, bool) {
	info, _ := f.Store.InspectRW(context.Background(), key)
	for _, h := range info.Holders {
		if h.Token == token {
			return h, true
		}
	}
	return driver.RWHolder{}, false
}

func (f *rwFault) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	f.calls.Add(1)
	if f.failExt.Load() || f.down.Load() {
		return driver.RWGrant{}, errDown
	}
	return f.Store.ExtendRW(ctx, key, token, ttl)
}

func (f *rwFault) ReleaseRW(ctx context.Context, key, token string) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return f.Store.ReleaseRW(ctx, key, token)
}

// The embedded store's notifier is hidden unless rwNotify lets it through.
func (f *rwFault) SubscribeRW() {}

type rwNotify struct{ *rwFault }

func (n rwNotify) Unwrap() driver.Store { return n.rwFault.Store }

// rwStore is f, seen through rwNotify if notify.
func rwStore(f *rwFault, notify bool) driver.RWMutex {
	if notify {
		return rwNotify{f}
	}
	return f
}

func newRWLocks(t *testing.T, store driver.RWMutex, opts ...dlock.Option) *dlock.RWLocks {
	t.Helper()
	l, err := dlock.NewRWLocks(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

// mustTry takes key by one try in mode.
func mustTry(t *testing.T, l *dlock.RWLocks, key string, mode driver.RWMode, opts ...dlock.Option) *dlock.RWHolding {
	t.Helper()
	try := l.TryRLock
	if mode == driver.RWWrite {
		try = l.TryLock
	}
	h, err := try(context.Background(), key, opts...)
	if err != nil {
		t.Fatalf("try %v of %q: %v", mode, key, err)
	}
	return h
}

// rwCounts is what the holders themselves see: who is inside, the most
// readers at once, and how many times a writer was inside with anyone.
type rwCounts struct {
	mu                         sync.Mutex
	readers, writers, peakRead int
	overlaps                   int
}

func (c *rwCounts) enter(mode driver.RWMode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mode == driver.RWWrite {
		if c.readers > 0 || c.writers > 0 {
			c.overlaps++
		}
		c.writers++
		return
	}
	if c.writers > 0 {
		c.overlaps++
	}
	c.readers++
	c.peakRead = max(c.peakRead, c.readers)
}

func (c *rwCounts) leave(mode driver.RWMode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mode == driver.RWWrite {
		c.writers--
	} else {
		c.readers--
	}
}

// rwTraffic runs 12 goroutines that each take key 5 times through RLock
// (two times in three) or Lock, hold it a moment and release it, and
// returns what the holders counted.
func rwTraffic(t *testing.T, store driver.RWMutex) *rwCounts {
	c := new(rwCounts)
	synctest.Test(t, func(t *testing.T) {
		l := newRWLocks(t, store)
		var wg sync.WaitGroup
		for g := range 12 {
			wg.Go(func() {
				for i := range 5 {
					mode, lock := driver.RWRead, l.RLock
					if (g+i)%3 == 0 {
						mode, lock = driver.RWWrite, l.Lock
					}
					h, err := lock(context.Background(), "k")
					if err != nil {
						t.Error(err)
						return
					}
					c.enter(mode)
					time.Sleep(time.Millisecond) // work, on the bubble's clock
					c.leave(mode)
					if err := h.Release(context.Background()); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	})
	return c
}

// Readers overlap and a writer is alone, with many goroutines through the
// user API, waiting by notification and by pacing. Control: a store that
// grants a write as a read lets writers in with others, and the same count
// sees it.
func TestRWReadersOverlapWriterAlone(t *testing.T) {
	for _, notify := range []bool{true, false} {
		c := rwTraffic(t, rwStore(newRWFault(), notify))
		if c.overlaps != 0 {
			t.Errorf("notify=%v: a writer was inside with someone %d times", notify, c.overlaps)
		}
		if c.peakRead < 2 {
			t.Errorf("notify=%v: at most %d reader inside at once, want overlapping readers", notify, c.peakRead)
		}
	}
	f := newRWFault()
	f.ignoreWriter = true
	if c := rwTraffic(t, f); c.overlaps == 0 {
		t.Error("control: a store ignoring writers showed no overlap; the count cannot see one")
	}
}

// Invalid arguments return ErrInvalid before any I/O. Control: a valid
// call reaches the store.
func TestRWInvalidArgsBeforeIO(t *testing.T) {
	f := newRWFault()
	l := newRWLocks(t, f)
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	cases := map[string]func() error{
		"empty key":        func() error { _, err := l.RLock(ctx, ""); return err },
		"bad utf-8 key":    func() error { _, err := l.TryLock(ctx, "\xff"); return err },
		"nil ctx":          func() error { _, err := l.Lock(nil, "k"); return err }, //nolint:staticcheck // the point
		"short ttl":        func() error { _, err := l.TryRLock(ctx, "k", dlock.WithTTL(time.Millisecond)); return err },
		"WithRead":         func() error { _, err := l.Lock(ctx, "k", dlock.WithRead("r")); return err },
		"negative wait":    func() error { _, err := l.RLock(ctx, "k", dlock.WithWait(-1)); return err },
		"nil fn":           func() error { return l.Do(ctx, "k", nil) },
		"nil store":        func() error { _, err := dlock.NewRWLocks(nil); return err },
		"bad default wait": func() error { _, err := dlock.NewRWLocks(f, dlock.WithWait(-1)); return err },
		"RDo empty key":    func() error { return l.RDo(ctx, "", noop) },
	}
	for name, call := range cases {
		if err := call(); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("%d store calls for invalid arguments, want none", n)
	}
	h := mustTry(t, l, "k", driver.RWRead)
	if f.calls.Load() == 0 {
		t.Error("control: a valid call made no store call")
	}
	if err := h.Extend(ctx, time.Millisecond); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Extend(1ms): %v, want ErrInvalid", err)
	}
	_ = h.Release(ctx)
}
