package zkstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// currentTimeout is the timeout to count with now: the Model's, or less if
// the server granted less on a later connection.
func (s *Store) currentTimeout() time.Duration {
	if s.neg != nil {
		if t, _ := s.neg.Timeout(); t > 0 && t < s.timeout {
			return t
		}
	}
	return s.timeout
}

// read runs f, one ZooKeeper read, and returns its error, or ctx's as
// soon as ctx ends (see call). Its reply confirms nothing: a follower cut
// off from the leader goes on answering reads (for up to syncLimit ticks)
// while the leader may expire the session.
func (s *Store) read(ctx context.Context, f func() error) error { return s.call(ctx, false, f, nil) }

// write runs f, one request that goes through the leader (a write, or a
// sync), and returns its error, or ctx's as soon as ctx ends (see call). A
// reply confirms the session as of the send time.
func (s *Store) write(ctx context.Context, f func() error) error { return s.call(ctx, true, f, nil) }

// call runs f, one ZooKeeper request (go-zookeeper's calls take no
// context), and returns its error, or ctx's as soon as ctx ends: the request
// then goes on until the conn answers or fails (within its receive timeout,
// two thirds of the session timeout), and its outcome is unknown. If ctx
// ends first and f then succeeds, undo (if not nil) is called from the
// request's goroutine: a create nobody waits for is deleted again. If
// confirms, a reply from the server confirms the session as of the send
// time.
func (s *Store) call(ctx context.Context, confirms bool, f func() error, undo func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errClosed
	}
	s.reqs.Add(1)
	before := s.conn.SessionID()
	sent := time.Now()
	done := make(chan error, 1)
	var state atomic.Int32 // 0 pending, 1 answered, 2 abandoned by the caller
	go func() {
		err := connLoss(f())
		if confirms && replied(err) {
			if after := s.conn.SessionID(); after != 0 && (before == 0 || before == after) {
				s.confirm(after, sent)
			}
		}
		if state.CompareAndSwap(0, 1) {
			done <- err
		} else if err == nil && undo != nil {
			undo()
		}
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if !state.CompareAndSwap(0, 2) {
			return <-done // answered as ctx ended: the answer wins
		}
		return fmt.Errorf("outcome unknown: %w", context.Cause(ctx))
	}
}

// connLoss returns err, with a raw transport error (go-zookeeper passes on
// the socket's own error when a write to a dead connection fails: "broken
// pipe", "connection reset") marked as zk.ErrConnectionClosed, which is
// what it is: the request's outcome is unknown and the conn reconnects.
func connLoss(err error) error {
	if err != nil && !errors.Is(err, zk.ErrConnectionClosed) && isTransport(err) {
		return fmt.Errorf("%w: %w", zk.ErrConnectionClosed, err)
	}
	return err
}

// isTransport reports whether err is a socket's error (apart from connLoss
// so that a nil error allocates nothing: errors.As's target escapes).
func isTransport(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// replied reports whether err (nil included) is the server's answer rather
// than a failure of the connection or session.
func replied(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrClosing),
		errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrSessionMoved), errors.Is(err, zk.ErrUnknown):
		return false
	}
	return isServerError(err)
}

// isServerError reports whether err is one of the errors go-zookeeper makes
// from a reply's error code about the request itself.
func isServerError(err error) bool {
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrNoAuth,
		zk.ErrInvalidACL, zk.ErrAuthFailed, zk.ErrNoChildrenForEphemerals, zk.ErrBadArguments, zk.ErrInvalidPath} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// confirm records that session sid was alive when a request sent at sent
// reached the server: it lasts at least until sent + timeout (less the
// margin). A session id the store has not seen means the conn made a new
// session: the old one expired, and every holding in it is lost.
func (s *Store) confirm(sid int64, sent time.Time) {
	c := sent.Add(s.currentTimeout() - s.margin)
	s.mu.Lock()
	defer s.mu.Unlock()
	if sid != s.sess.id {
		s.sess = session{id: sid, certain: c}
		clear(s.orphan) // their nodes went with the old session
		for k, h := range s.held {
			if h.sid != sid {
				delete(s.held, k)
			}
		}
		for k, h := range s.rw {
			if h.sid != sid {
				delete(s.rw, k)
			}
		}
		for k, h := range s.sem {
			if h.sid != sid {
				delete(s.sem, k)
			}
		}
		return
	}
	if c.After(s.sess.certain) {
		s.sess.certain = c
	}
}

// certainTTL is how long session sid is certain to last counted from
// start; 0 if it is not the session the store knows.
func (s *Store) certainTTL(sid int64, start time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sid != s.sess.id {
		return 0
	}
	return min(max(s.sess.certain.Sub(start), 0), s.timeout)
}

// KeepAlive implements driver.SessionKeeper: it confirms the store's
// session with one request (a sync, which goes through the leader).
// go-zookeeper keeps the session alive by itself while it can reach the
// ensemble; KeepAlive tells the caller, as Extend does for the holdings it
// is asked about, that the session is still the one holding the store's
// locks. An error means nothing was confirmed: one matching ctx's error,
// or driver.ErrInvalid after Close; driver.NotHeld(false) if the session
// expired and was replaced (every holding of the store is lost); otherwise
// ZooKeeper's error, matching no sentinel.
func (s *Store) KeepAlive(ctx context.Context) error {
	sid := s.conn.SessionID()
	err := s.write(ctx, func() error {
		_, e := s.conn.Sync(s.root)
		return e
	})
	if err != nil {
		return fmt.Errorf("zkstore: keepalive: %w", err)
	}
	if now := s.conn.SessionID(); now != sid && sid != 0 {
		return fmt.Errorf("zkstore: keepalive: the session expired and was replaced: %w", driver.NotHeld(false))
	}
	return nil
}
