package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// loop is the listener goroutine of run r: connect, LISTEN, hand
// notifications out until the connection dies, reconnect with a bounded
// backoff, until r ends (idle, Close) or an attempt fails with nobody left
// to serve.
func (l *listener) loop(r *run) {
	backoff := listenBackoffMin
	listened := false // a connection of this run listened before
	for r.ctx.Err() == nil {
		conn, release, err := l.connect(r.ctx)
		if err != nil {
			if !l.attemptFailed(r, err) || permanent(err) {
				if permanent(err) {
					// Subscribers of an earlier connection would wait for
					// releases nobody will hear: they retry, and back off.
					l.fanout("", true)
				}
				return
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-r.ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, listenBackoffMax)
			continue
		}
		backoff = listenBackoffMin
		l.listening(r, listened)
		listened = true
		l.serve(r, conn)
		release()
		l.lost(r)
	}
}

// connect opens the listener's connection, runs LISTEN and proves with a
// probe NOTIFY sent through the pool that notifications reach it (see
// probeNotify), within listenConnect and the probe's bound. The probe costs
// one round trip per connection, not per Subscribe. A deaf connection (a
// pooler in transaction mode) fails with errDeaf.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, func(), error) {
	cctx, cancel := context.WithTimeout(ctx, listenConnect)
	defer cancel()
	conn, release, err := l.b.listenConn(cctx)
	if err != nil {
		return nil, nil, err
	}
	for _, q := range l.listenSQL() {
		if _, err := conn.Exec(cctx, q); err != nil {
			release()
			return nil, nil, err
		}
	}
	if l.probeWait > 0 {
		if _, err := probeNotify(cctx, conn, l.b, l.channel, l.probeWait, l.dispatch); err != nil {
			if errors.Is(err, errDeaf) {
				unlisten(conn)
			}
			release()
			return nil, nil, err
		}
	}
	return conn, release, nil
}

// listening marks the current attempt of r a success; after a reconnection
// it wakes every subscriber, since releases sent while no connection
// listened were lost.
func (l *listener) listening(r *run, reconnected bool) {
	l.mu.Lock()
	if l.run != r {
		l.mu.Unlock()
		return
	}
	l.lastErr = nil
	close(l.cur.ready)
	l.mu.Unlock()
	if reconnected {
		l.fanout("", true)
	}
}

// lost starts a new attempt after r's connection died.
func (l *listener) lost(r *run) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run == r {
		l.cur = newAttempt()
	}
}

// attemptFailed records a failed attempt of r and reports whether r goes
// on (it stops when it has been replaced or nobody subscribes).
func (l *listener) attemptFailed(r *run, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run != r {
		return false
	}
	l.failLocked(l.cur, err)
	l.lastErr = err
	l.cur = newAttempt()
	if errors.Is(err, errDeaf) {
		l.deafUntil = time.Now().Add(listenDeafRetry)
	}
	if l.count == 0 || permanent(err) {
		l.run, l.cur = nil, nil
		r.cancel()
		return false
	}
	return true
}

// serve hands out notifications until conn fails or r ends. A quiet
// connection is checked every listenPing with a query: a cut network
// sends no error, and a listener that does not know its connection is
// dead would leave waiters without wake-ups.
func (l *listener) serve(r *run, conn *pgx.Conn) {
	for {
		wctx, cancel := context.WithTimeout(r.ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			l.dispatch(n.Channel, n.Payload)
			continue
		case r.ctx.Err() != nil || !timedOut || conn.IsClosed():
			return
		}
		pctx, cancel := context.WithTimeout(r.ctx, listenPing/3)
		_, err = conn.Exec(pctx, "SELECT 1")
		cancel()
		if err != nil {
			return
		}
	}
}
