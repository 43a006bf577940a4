package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tunables of the listener (variables so that tests can shorten them).
var (
	// listenIdle is how long the listener keeps its connection after the
	// last subscriber left, so that waiters coming and going do not
	// reconnect each time.
	listenIdle = 30 * time.Second
	// listenPing is how long the listener waits for a notification before
	// it checks its connection with a query (a cut network sends no error).
	listenPing = 15 * time.Second
	// listenConnect bounds one connection attempt (connect and LISTEN).
	listenConnect = 10 * time.Second
	// listenBackoff bounds the pause between reconnection attempts.
	listenBackoffMin, listenBackoffMax = 50 * time.Millisecond, 2 * time.Second
)

// sub is one subscription: a channel of one value, never closed.
type sub struct{ ch chan struct{} }

// attempt is one connection attempt of the listener, for the subscribers
// waiting on it: ready is closed when LISTEN is active, failed when the
// attempt failed (err set before).
type attempt struct {
	ready, failed chan struct{}
	err           error
}

func newAttempt() *attempt { return &attempt{ready: make(chan struct{}), failed: make(chan struct{})} }

// listener is the store's one LISTEN connection and its subscribers.
type listener struct {
	b       backend
	channel string
	// permits, if set, is a second channel, of the Semaphore's releases:
	// its payloads wake the subscriptions of permitsSub(key).
	permits string
	// rw, if set, is a third channel, of the RWMutex's releases and
	// downgrades: its payloads wake the subscriptions of rwSub(key).
	rw string

	mu    sync.Mutex
	subs  map[string]map[*sub]struct{}
	count int
	run   *run     // the goroutine that serves subscribers now; nil if none
	cur   *attempt // the current connection attempt of run
	idle  *time.Timer
	// lastErr is the error of the last connection attempt, nil once a
	// connection listens: Subscribe fails at once while it is set.
	lastErr error
	// deafUntil is when a deaf verdict (lastErr errDeaf) expires: until
	// then Subscribe fails at once with errors.ErrUnsupported.
	deafUntil time.Time
	// probeWait bounds the probe of each new connection (listenProbe; 0:
	// no probe, for the tests' negative control).
	probeWait time.Duration
	closed    bool
	wg        sync.WaitGroup
}

// run is one life of the listener goroutine, ended by cancel (idle or Close).
type run struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newListener(b backend, channel string) *listener {
	return &listener{b: b, channel: channel, subs: map[string]map[*sub]struct{}{}, probeWait: listenProbe}
}

// Subscribe implements driver.Notifier. The first subscriber starts the
// store's listener: one connection of its own (not taken from the pool;
// with NewDB, one pinned connection of the *sql.DB) that runs LISTEN on the
// store's channel and hands each release's NOTIFY to the key's subscribers.
// Subscribe returns once LISTEN is active and it has marked the key's
// current holding (if any) as waited for, one more statement: every release
// of that holding that commits afterwards arrives. Only the release of the
// last hold of a holding that someone waited for sends NOTIFY: one that
// Subscribe marked, or that an Acquire met contended (the attempt marks it
// in the same statement). A holding that began after Subscribe and that no
// Acquire met contended ends without NOTIFY: a waiter tries again after it
// subscribes (the Client does), and that attempt marks the holding it
// meets. So a release nobody waits for spares its commit the notification
// queue. Acquisitions, extensions, partial and refused releases send
// nothing. A lease that ends without a release sends nothing either (waiters learn its
// end from ContendedError.Remaining). When the listener's connection dies it
// reconnects, and once it listens again it wakes every subscriber, since a
// release in between was not heard.
//
// Each new listening connection is proved once, before Subscribe returns:
// the listener sends a probe NOTIFY through the pool and waits up to 2 s
// for it (on a direct connection it arrives in about a millisecond). Behind
// a pooler in transaction mode (PgBouncer) it never arrives: LISTEN ran on
// a server connection the pooler lends to others, and no release would be
// heard. The store then answers Subscribe with errors.ErrUnsupported, at
// once and without I/O, for 10 minutes (then the next Subscribe probes
// again), and the Client waits with its backoff, bounded by the holder's
// remaining lease, instead of sleeping until that lease would end.
//
// It returns an error matching no sentinel if the listener cannot connect
// or the mark gets no answer (the client then backs off), one matching
// driver.ErrRefused if the mark is refused (a table without the waited
// column: run Migrate), one matching errors.ErrUnsupported for a *sql.DB
// whose driver is not pgx's or a listening connection that hears nothing
// (the probe), and one matching driver.ErrInvalid after Close.
func (s *Store) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := checkKey(key); err != nil {
		return nil, nil, err
	}
	ch, cancel, err := s.lis.subscribe(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if _, err := s.db.exec(ctx, s.sql.mark, key); err != nil {
		cancel()
		return nil, nil, wrap("subscribe: mark the holding", err)
	}
	return ch, cancel, nil
}

func (l *listener) subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	sb := &sub{ch: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, errClosed()
	}
	if errors.Is(l.lastErr, errNotPgx) || (errors.Is(l.lastErr, errDeaf) && time.Now().Before(l.deafUntil)) {
		err := l.lastErr
		l.mu.Unlock()
		return nil, nil, unsupported(err)
	}
	if l.lastErr != nil && l.run != nil {
		err := l.lastErr
		l.mu.Unlock()
		return nil, nil, fmt.Errorf("pgstore: listen (reconnecting): %w", err)
	}
	if l.subs[key] == nil {
		l.subs[key] = map[*sub]struct{}{}
	}
	l.subs[key][sb] = struct{}{}
	l.count++
	if l.idle != nil {
		l.idle.Stop()
		l.idle = nil
	}
	if l.run == nil {
		l.start()
	}
	at := l.cur
	l.mu.Unlock()
	var once sync.Once
	cancel := func() { once.Do(func() { l.unsubscribe(key, sb) }) }
	select {
	case <-at.ready:
		return sb.ch, cancel, nil
	case <-at.failed:
		cancel()
		if permanent(at.err) {
			return nil, nil, unsupported(at.err)
		}
		return nil, nil, fmt.Errorf("pgstore: listen: %w", at.err)
	case <-ctx.Done():
		cancel()
		return nil, nil, ctx.Err()
	}
}

// start starts a listener goroutine (l.mu held).
func (l *listener) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{ctx: ctx, cancel: cancel}
	l.run, l.cur, l.lastErr = r, newAttempt(), nil
	l.wg.Add(1)
	go func() { defer l.wg.Done(); l.loop(r) }()
}

func (l *listener) unsubscribe(key string, sb *sub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.subs[key][sb]; !ok {
		return
	}
	delete(l.subs[key], sb)
	if len(l.subs[key]) == 0 {
		delete(l.subs, key)
	}
	l.count--
	if l.count == 0 && l.run != nil && !l.closed {
		r := l.run
		l.idle = time.AfterFunc(listenIdle, func() { l.stopIfIdle(r) })
	}
}

// stopIfIdle ends run r if nobody subscribed since the timer was set.
func (l *listener) stopIfIdle(r *run) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == 0 && l.run == r {
		l.run, l.cur, l.idle = nil, nil, nil
		r.cancel()
	}
}

// close ends the listener; wait waits for its goroutine.
func (l *listener) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.idle != nil {
		l.idle.Stop()
	}
	if l.run != nil {
		l.run.cancel()
		if l.cur != nil {
			l.failLocked(l.cur, errClosed())
		}
		l.run, l.cur = nil, nil
	}
}

func (l *listener) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failLocked ends attempt at with err, once (l.mu held).
func (l *listener) failLocked(at *attempt, err error) {
	select {
	case <-at.ready:
		return
	case <-at.failed:
		return
	default:
	}
	at.err = err
	close(at.failed)
}

// fanout wakes the subscribers of key, or all when all is set.
func (l *listener) fanout(key string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wake := func(set map[*sub]struct{}) {
		for sb := range set {
			select {
			case sb.ch <- struct{}{}:
			default: // a value is pending: coalesced
			}
		}
	}
	if all {
		for _, set := range l.subs {
			wake(set)
		}
		return
	}
	wake(l.subs[key])
}

// listenSQL are the LISTEN statements for the channels: the read-write
// lock's and the permits channel's first, so that the connection's last statement (what
// pg_stat_activity shows) is the lease table's LISTEN.
func (l *listener) listenSQL() []string {
	q := []string{"LISTEN " + pgx.Identifier{l.channel}.Sanitize()}
	if l.permits != "" {
		q = append([]string{"LISTEN " + pgx.Identifier{l.permits}.Sanitize()}, q...)
	}
	if l.rw != "" {
		q = append([]string{"LISTEN " + pgx.Identifier{l.rw}.Sanitize()}, q...)
	}
	return q
}

// dispatch wakes the subscribers a notification on channel is for.
func (l *listener) dispatch(channel, payload string) {
	switch {
	case channel == l.channel:
		l.fanout(payload, false)
	case channel == l.permits && l.permits != "":
		l.fanout(permitsSub(payload), false)
	case channel == l.rw && l.rw != "":
		l.fanout(rwSub(payload), false)
	}
}
