package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// subscriber multiplexes the release channels of all waiters of one Store
// over a single pub/sub connection. The connection opens with the first
// waiter and closes connLinger after the last one left, so an idle store
// holds no connection and no goroutine, and a key contended back and forth
// between processes does not dial a connection per turn.
type subscriber struct {
	client redis.UniversalClient

	mu      sync.Mutex // also serialises SUBSCRIBE/UNSUBSCRIBE so they reach Redis in order
	ps      *redis.PubSub
	opening chan struct{} // closed when the connection being opened is ready; nil if none
	chans   map[string]*channelState
	idle    *time.Timer // closes ps when no channel is left; nil if not armed
	closed  bool        // Store.Close was called: no new connection
}

// connLinger is how long the pub/sub connection stays open with no waiter.
const connLinger = time.Second

type channelState struct {
	waiters map[chan struct{}]struct{}
	ready   chan struct{} // closed when Redis confirms the subscription
	live    bool
}

// confirmTimeout bounds the wait for Redis to confirm a subscription; a
// waiter that gives up falls back to waking at the holder's expiry.
const confirmTimeout = 2 * time.Second

func newSubscriber(client redis.UniversalClient) *subscriber {
	return &subscriber{client: client, chans: make(map[string]*channelState)}
}

// Subscribe implements driver.Notifier. It returns once Redis has confirmed the
// subscription, so a release published after it returns is never missed
// while the connection stays up. If ctx ends first it returns ctx's error;
// a subscription not confirmed within 2 s, or one after Close, an error
// matching driver.ErrUnavailable; a connection that fails, go-redis's error.
// On error nothing stays subscribed.
func (s *Store) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := checkKey(key); err != nil {
		return nil, nil, err
	}
	return s.subs.subscribe(ctx, s.channel(key))
}

func (s *subscriber) subscribe(ctx context.Context, channel string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	st, err := s.register(ctx, channel, ch)
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	cancel := func() { once.Do(func() { s.unregister(channel, ch) }) }
	timer := time.NewTimer(confirmTimeout)
	defer timer.Stop()
	select {
	case <-st.ready:
		return ch, cancel, nil
	case <-ctx.Done():
		cancel()
		return nil, nil, ctx.Err()
	case <-timer.C:
		cancel()
		return nil, nil, fmt.Errorf("%w: subscription to %q not confirmed", driver.ErrUnavailable, channel)
	}
}

func (s *subscriber) register(ctx context.Context, channel string, ch chan struct{}) (*channelState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.ps == nil && s.opening != nil && !s.closed {
		if err := s.awaitOpening(ctx); err != nil {
			return nil, err
		}
	}
	if s.closed {
		return nil, errStoreClosed
	}
	st := s.chans[channel]
	if st == nil {
		if s.idle != nil {
			s.idle.Stop()
			s.idle = nil
		}
		st = &channelState{waiters: make(map[chan struct{}]struct{}), ready: make(chan struct{})}
		if err := s.send(ctx, channel); err != nil {
			s.lingerIfIdle()
			return nil, err
		}
		s.chans[channel] = st
	}
	st.waiters[ch] = struct{}{}
	return st, nil
}

var errStoreClosed = fmt.Errorf("%w: store closed: no subscriptions", driver.ErrUnavailable)

// send issues SUBSCRIBE, opening the shared connection first if needed.
// Called with s.mu held.
func (s *subscriber) send(ctx context.Context, channel string) error {
	if s.ps != nil {
		return s.ps.Subscribe(ctx, channel)
	}
	return s.open(ctx, channel)
}

// open dials the shared connection, subscribed to channel. Called with s.mu
// held, it lets go of it during the dial, which against a server that
// accepts but does not answer lasts up to the client's read timeout: Close
// must not wait for that. Subscribers arriving meanwhile wait for opening.
// If the store was closed meanwhile, the new connection is closed at once.
func (s *subscriber) open(ctx context.Context, channel string) error {
	done := make(chan struct{})
	s.opening = done
	s.mu.Unlock()
	ps := s.client.Subscribe(ctx, channel)
	s.mu.Lock()
	s.opening = nil
	close(done)
	switch {
	case ps == nil:
		return fmt.Errorf("%w: no pub/sub connection", driver.ErrUnavailable)
	case s.closed:
		_ = ps.Close()
		return errStoreClosed
	}
	s.ps = ps
	go s.read(ps, ps.ChannelWithSubscriptions())
	return nil
}

// awaitOpening waits, with s.mu let go, for the connection being opened.
func (s *subscriber) awaitOpening(ctx context.Context) error {
	wait := s.opening
	s.mu.Unlock()
	defer s.mu.Lock()
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *subscriber) unregister(channel string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[channel]
	if st == nil {
		return
	}
	delete(st.waiters, ch)
	if len(st.waiters) > 0 {
		return
	}
	delete(s.chans, channel)
	_ = s.ps.Unsubscribe(context.Background(), channel)
	s.lingerIfIdle()
}

// lingerIfIdle arms the timer that closes the connection if no channel is
// left on it. Called with s.mu held.
func (s *subscriber) lingerIfIdle() {
	if s.ps == nil || len(s.chans) > 0 || s.idle != nil {
		return
	}
	ps := s.ps
	s.idle = time.AfterFunc(connLinger, func() { s.closeIdle(ps) })
}

// closeIdle closes ps if it is still the connection and still unused.
func (s *subscriber) closeIdle(ps *redis.PubSub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps != ps || len(s.chans) > 0 {
		return
	}
	_ = ps.Close()
	s.ps, s.idle = nil, nil
}

// read dispatches messages from one pub/sub connection until it closes.
func (s *subscriber) read(ps *redis.PubSub, msgs <-chan any) {
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				s.confirmed(ps, m.Channel)
			}
		case *redis.Message:
			s.notify(ps, m.Channel)
		}
	}
}

// confirmed marks a subscription live. A repeated confirmation means go-redis
// reconnected and resubscribed: messages may have been lost meanwhile, so the
// waiters are woken to retry.
func (s *subscriber) confirmed(ps *redis.PubSub, channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[channel]
	if st == nil || s.ps != ps {
		return
	}
	if !st.live {
		st.live = true
		close(st.ready)
		return
	}
	st.wakeAll()
}

func (s *subscriber) notify(ps *redis.PubSub, channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.chans[channel]; st != nil && s.ps == ps {
		st.wakeAll()
	}
}

func (st *channelState) wakeAll() {
	for ch := range st.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *subscriber) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	if s.ps == nil {
		return nil
	}
	err := s.ps.Close()
	s.ps = nil
	s.chans = make(map[string]*channelState)
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return err
}
