package dlock_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// logLines parses the JSON log lines in out.
func logLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, b := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("log line %q: %v", b, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// syncBuffer is a bytes.Buffer safe for the goroutines of the logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// A loss is logged at Warn, with the key, the fence and its cause, by a
// logger at its default level (Info), which logs no acquisition or
// release: those are Debug.
func TestSlogObserverLogsLossAtWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		logger := slog.New(slog.NewJSONHandler(&buf, nil))
		c, fs := newClient(t, dlock.WithObserver(dlock.SlogObserver(logger)), dlock.WithAutoRenew(300*time.Millisecond))
		release(t, mustLock(t, c, testCtx(t), "quiet"))
		l := mustLock(t, c, testCtx(t), "k")
		fs.failExt.Store(true)
		<-l.Done()
		synctest.Wait()
		var losses, failures int
		for _, m := range logLines(t, buf.Bytes()) {
			if m["key"] != "k" || m["level"] != "WARN" {
				t.Fatalf("logged %v: want only Warn lines of key k", m)
			}
			switch m["msg"] {
			case "dlock: renewal failed":
				failures++
			case "dlock: lost":
				losses++
				err, _ := m["err"].(string)
				if m["outcome"] != "expired" || m["fence"] != float64(l.Fence()) || m["kind"] != "lock" ||
					!strings.Contains(err, "expired") || !strings.Contains(err, "renewal failed") {
					t.Fatalf("loss logged as %v: want outcome expired, fence %d, kind lock and the cause", m, l.Fence())
				}
			}
		}
		if losses != 1 || failures == 0 {
			t.Fatalf("logged %d losses and %d failed renewals, want 1 and some:\n%s", losses, failures, buf.Bytes())
		}
	})
}

// tokenSpy records every token its stores are asked to acquire with, and
// lets the stores' capabilities through (handoff, notification).
type tokenSpy struct {
	mu     sync.Mutex
	tokens map[string]string // token -> key
}

func (s *tokenSpy) saw(key, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = map[string]string{}
	}
	s.tokens[token] = key
}

func (s *tokenSpy) list() (tokens []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok := range s.tokens {
		tokens = append(tokens, tok)
	}
	return tokens
}

// tokenOf returns a token that acquired key.
func (s *tokenSpy) tokenOf(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, k := range s.tokens {
		if k == key {
			return tok
		}
	}
	return ""
}

type spyMutex struct {
	*faultStore
	spy *tokenSpy
}

func (m spyMutex) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	m.spy.saw(key, token)
	return m.faultStore.Acquire(ctx, key, token, ttl)
}

func (m spyMutex) Unwrap() driver.Mutex { return m.faultStore.Mutex }

type spySem struct {
	*semFault
	spy *tokenSpy
}

func (m spySem) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	m.spy.saw(key, token)
	return m.semFault.AcquirePermits(ctx, key, token, n, k, ttl)
}

// digest is a token's SHA-256 in hex; a store that keeps only a digest
// (etcd) keeps its first 32 digits, found by searching for those.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// leaks returns the tokens found in out, themselves or as their digest.
func leaks(out []byte, tokens []string) (found []string) {
	for _, tok := range tokens {
		if bytes.Contains(out, []byte(tok)) || bytes.Contains(out, []byte(digest(tok))) {
			found = append(found, tok)
		}
	}
	return found
}

// logEveryEvent runs, in a bubble, calls that make every event of the
// Client and the Semaphores with obs(logger, spy) observing, logged at
// Debug, and returns the log and the tokens used.
func logEveryEvent(t *testing.T, obs func(*slog.Logger, *tokenSpy) dlock.Observer) (out []byte, tokens []string) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		spy := &tokenSpy{}
		o := dlock.WithObserver(obs(logger, spy))
		ctx := testCtx(t)
		fs := &faultStore{Mutex: memstore.New(nil)}
		c := newClientOn(t, spyMutex{fs, spy}, o, dlock.WithAutoRenew(300*time.Millisecond))
		l := mustLock(t, c, ctx, "k")
		waiter := make(chan *dlock.Lease)
		go func() { waiter <- mustLock(t, c, ctx, "k") }()
		synctest.Wait()
		time.Sleep(150 * time.Millisecond) // a renewal
		release(t, l)                      // handed off
		l = <-waiter
		spy.saw("k", l.Token()) // made by the handoff (Transfer)
		if _, err := c.Lock(ctx, "k", dlock.WithWait(10*time.Millisecond)); err == nil {
			t.Fatal("Lock of a held key succeeded")
		}
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if err := l.Release(ended); !errors.Is(err, context.Canceled) {
			t.Fatalf("Release(ended ctx): %v", err) // released in the background
		}
		l = mustLock(t, c, ctx, "lost")
		fs.failExt.Store(true)
		<-l.Done()
		synctest.Wait()

		sf := &semFault{Semaphore: memstore.New(nil)}
		s := newSems(t, spySem{sf, spy}, o, dlock.WithAutoRenew(300*time.Millisecond))
		p := mustAcquire(t, s, "sem", 2, 1)
		sf.failExt.Store(true)
		<-p.Done()
		synctest.Wait()
		out, tokens = buf.Bytes(), spy.list()
	})
	return out, tokens
}

// No log line of SlogObserver holds a token or its digest, over every
// event of a lease and a permit. Negative control: an observer that also
// logs the token of a lost lease and the digest of a lost permit's is
// caught.
func TestSlogObserverNeverLogsToken(t *testing.T) {
	out, tokens := logEveryEvent(t, func(l *slog.Logger, _ *tokenSpy) dlock.Observer { return dlock.SlogObserver(l) })
	if len(tokens) < 4 {
		t.Fatalf("the scenario used %d tokens", len(tokens))
	}
	msgs := map[string]bool{}
	for _, m := range logLines(t, out) {
		msgs[m["msg"].(string)] = true
	}
	for _, msg := range []string{"dlock: wait started", "dlock: acquired", "dlock: not acquired", "dlock: renewed",
		"dlock: renewal failed", "dlock: lost", "dlock: released in the background", "dlock: handed off"} {
		if !msgs[msg] {
			t.Errorf("the scenario logged no %q line", msg)
		}
	}
	if found := leaks(out, tokens); len(found) > 0 {
		t.Fatalf("%d tokens logged:\n%s", len(found), out)
	}

	out, tokens = logEveryEvent(t, func(l *slog.Logger, spy *tokenSpy) dlock.Observer {
		inner := dlock.SlogObserver(l)
		return dlock.ObserverFunc(func(ctx context.Context, e dlock.Event) {
			inner.Event(ctx, e)
			if e.Type == dlock.EventLost {
				leak := spy.tokenOf(e.Key)
				if e.Kind == dlock.KindPermit {
					leak = digest(leak)
				}
				l.Warn("leaky", "owner", leak)
			}
		})
	})
	if found := leaks(out, tokens); len(found) != 2 {
		t.Fatalf("control: a leaking observer was caught leaking %d tokens, want 2:\n%s", len(found), out)
	}
}
