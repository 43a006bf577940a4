package dlock

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"example.com/dlock/driver"
)

// Turns. A store's release notification (driver.Notifier) would wake every
// waiter of the key subscribed to it, and each would then ask the store for
// the key: a herd of requests per release, one per waiting Client, of which
// one at most succeeds. Instead, the exclusive waiters of a key in one
// process that share a store's notifier line up in the order they
// subscribed, share one subscription of the store, and a notification
// wakes the first of them only (its turn). The others sleep on until the
// next notification reaches them or the holder's lease would expire (the
// Pacer's bound, which also covers a lost message), so each release costs
// this process an attempt or two (see below), not one per waiting Client.
//
// The first waiter keeps its place until its wait ends. If it ends without
// the key after a wake-up (cancelled, its wait bound elapsed, its Client
// closed), it hands the turn on: the next waiter is woken as if by the
// notification, so a release is never left to the expiry bound; one whose
// attempt gets no answer wakes the next as well, keeping its place. A waiter
// that acquired the key wakes the first of those left too: its attempt
// meets the new holding, which a store may notify the release of only if
// a waiter met it (PostgreSQL's marks, see pgstore's Subscribe), and
// learns when that holding would expire. So a hand-over costs the release,
// the acquisition and one contended attempt, however many wait.
//
// On a store that can neither notify nor queue waiters (the MariaDB lease
// table), the Lock waiters of a key that share the store value line up the
// same way, with no subscription: only the first polls (lease.Poller), the
// others sleep until the holder's lease would expire or a waiter leaving
// wakes them; the first hands the polling on whenever it leaves. A free
// key is thus still found within the first's backoff, and the store sees
// one poller per process instead of one per waiting Client.
//
// Only Lock's waits line up (the waits of read-write locks, semaphores and
// families, whose one release may let in several, do not), and not on a
// notifier that cannot be a map key.

// turnsHandOn is false only in tests' controls: a waiter leaving without
// the key, or getting no answer, after a wake-up then hands nothing on (a
// lost wake-up).
var turnsHandOn = true

// turnLines is the process's lines, one per notifier and key.
var turnLines = struct {
	mu sync.Mutex
	m  map[turnKey]*turnLine
}{m: make(map[turnKey]*turnLine)}

type turnKey struct {
	id  any // the notifier, or the store of a polling line
	key string
}

// turnLine is the line of one key. Its fields are guarded by turnLines.mu,
// except ready's, set before ready is closed.
type turnLine struct {
	polls  bool          // the store cannot notify: the first waiter polls
	ready  chan struct{} // closed once the store's subscription is answered
	err    error         // the store's subscription failed
	cancel func()        // ends the store's subscription
	done   chan struct{} // closed when the line ends
	subs   []*turnSub    // in the order they subscribed: subs[0] has the turn
}

// turnSub is one wait's place in a line; it serves the wait's Pacer as its
// driver.Notifier. A turnSub serves one wait, by one goroutine.
type turnSub struct {
	n     driver.Notifier // nil in a polling line
	id    any
	k     turnKey
	line  *turnLine
	ch    chan struct{}
	woken bool // a notification reached it (guarded by turnLines.mu)
	won   bool // its wait acquired the key (guarded by turnLines.mu)
}

// turnNotifier returns the notifier of a wait with cfg: a place in a line
// (see turnNotifier) unless it is a single try, which never pauses.
func (c *Client) turnNotifier(cfg config) (driver.Notifier, *turnSub) {
	if cfg.wait == 0 {
		return c.caps.notifier, nil
	}
	return turnNotifier(c.caps.notifier, c.store, c.caps.queuer != nil)
}

// turnNotifier returns the driver.Notifier a Lock's Pacer subscribes to,
// given the store's notifier n (nil if none) and whether it waits in a
// queue of its own: a new place in the key's line of n, or of store (a
// polling line) if it can neither notify nor queue; else n itself (a
// notifier or store that cannot key a map).
func turnNotifier(n driver.Notifier, store driver.Mutex, queues bool) (driver.Notifier, *turnSub) {
	switch {
	case n != nil && reflect.TypeOf(n).Comparable():
		s := &turnSub{n: n, id: n}
		return s, s
	case n == nil && !queues && store != nil && reflect.TypeOf(store).Comparable():
		s := &turnSub{id: store}
		return pollTurn{s}, s
	}
	return n, nil
}

// pollTurn is a place in a polling line (lease.Poller): only the first
// waiter polls.
type pollTurn struct{ *turnSub }

// Polls implements lease.Poller: s is the line's first waiter.
func (p pollTurn) Polls() bool {
	turnLines.mu.Lock()
	defer turnLines.mu.Unlock()
	l := p.line
	return l != nil && len(l.subs) > 0 && l.subs[0] == p.turnSub
}

// Subscribe implements driver.Notifier: it joins the key's line, the
// first to join subscribing to the store for the line. It returns the
// store's error (and stays out of the line) if that subscription fails,
// ctx's if ctx ends before it is answered.
func (s *turnSub) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	s.k, s.ch = turnKey{s.id, key}, make(chan struct{}, 1)
	turnLines.mu.Lock()
	l := turnLines.m[s.k]
	first := l == nil
	if first {
		l = &turnLine{polls: s.n == nil, ready: make(chan struct{}), done: make(chan struct{})}
		turnLines.m[s.k] = l
		if l.polls {
			l.cancel = func() {}
			close(l.ready)
		}
	}
	l.subs = append(l.subs, s)
	s.line = l
	turnLines.mu.Unlock()
	if first && !l.polls {
		l.open(ctx, s.n, key)
	}
	select {
	case <-l.ready:
	case <-ctx.Done():
		s.leave()
		return nil, nil, ctx.Err()
	}
	if l.err != nil {
		s.leave()
		return nil, nil, l.err
	}
	return s.ch, s.leave, nil
}

// open subscribes to the store for the line and starts forwarding its
// notifications; on failure the line leaves the map, so that the next
// waiter subscribes anew.
func (l *turnLine) open(ctx context.Context, n driver.Notifier, key string) {
	k := turnKey{n, key}
	ch, cancel, err := n.Subscribe(ctx, key)
	turnLines.mu.Lock()
	l.err, l.cancel = err, cancel
	if err != nil && turnLines.m[k] == l {
		delete(turnLines.m, k)
	}
	close(l.ready)
	turnLines.mu.Unlock()
	if err == nil {
		go l.forward(ch)
	}
}

// forward gives each of the store's notifications to the line's first
// waiter, until the line ends.
func (l *turnLine) forward(ch <-chan struct{}) {
	for {
		select {
		case <-l.done:
			return
		case <-ch:
			turnLines.mu.Lock()
			l.wake()
			turnLines.mu.Unlock()
		}
	}
}

// wake gives the turn to the first waiter, if any. turnLines.mu is held.
func (l *turnLine) wake() {
	if len(l.subs) == 0 {
		return
	}
	h := l.subs[0]
	h.woken = true
	select {
	case h.ch <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// unanswered is told that the wait's attempt got no answer (the store
// unreachable, a call cut short). If s had the turn after a wake-up, the
// next waiter is woken as well, so that a Client that cannot reach the
// store does not keep the others asleep until the holder's expiry; s keeps
// its place. No-op if it never subscribed.
func (s *turnSub) unanswered() {
	if s == nil {
		return
	}
	turnLines.mu.Lock()
	defer turnLines.mu.Unlock()
	l := s.line
	if l == nil || l.polls || !s.woken || len(l.subs) < 2 || l.subs[0] != s || !turnsHandOn {
		return
	}
	s.woken = false
	next := l.subs[1]
	next.woken = true
	select {
	case next.ch <- struct{}{}:
	default:
	}
}

// acquired records that the wait acquired the key (see leave). No-op if it
// never subscribed.
func (s *turnSub) acquired() {
	if s == nil {
		return
	}
	turnLines.mu.Lock()
	s.won = true
	turnLines.mu.Unlock()
}

// leave takes s out of its line (idempotent). A waiter leaving with the
// key, or the first one leaving without it after a wake-up, wakes the
// (new) first. The last to leave ends the store's subscription.
func (s *turnSub) leave() {
	turnLines.mu.Lock()
	l := s.line
	i := -1
	if l != nil {
		i = slices.Index(l.subs, s)
	}
	if i < 0 {
		turnLines.mu.Unlock()
		return
	}
	l.subs = slices.Delete(l.subs, i, i+1)
	if s.won || (i == 0 && (s.woken || l.polls) && turnsHandOn) {
		l.wake()
	}
	var cancel func()
	if len(l.subs) == 0 && l.cancel != nil {
		cancel, l.cancel = l.cancel, nil
		close(l.done)
		if turnLines.m[s.k] == l {
			delete(turnLines.m, s.k)
		}
	}
	turnLines.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
