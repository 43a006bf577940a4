package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// Tunables of the notification probe (variables so that tests can shorten
// them).
var (
	// listenProbe bounds how long a new listening connection waits for the
	// probe NOTIFY it sent through the pool, counted from the NOTIFY's
	// commit (a direct connection gets it within milliseconds).
	listenProbe = 2 * time.Second
	// listenDeafRetry is how long a store whose probe never arrived answers
	// Subscribe with errors.ErrUnsupported, without I/O, before the next
	// Subscribe tries a new connection and probe.
	listenDeafRetry = 10 * time.Minute
)

// probePrefix starts the payload of a probe NOTIFY; a random suffix makes
// it the probing connection's own.
const probePrefix = "dlock-probe-"

// errDeaf is why a listening connection is taken as deaf.
var errDeaf = errors.New("a NOTIFY sent through the pool never reached the connection that ran LISTEN: " +
	"a pooler in transaction or statement mode (PgBouncer) is in front, which runs LISTEN on a server connection " +
	"it then lends to others and forwards no notification")

// deafError is errDeaf with the probe's bound.
type deafError struct{ wait time.Duration }

func (e deafError) Error() string { return fmt.Sprintf("within %v, %v", e.wait, errDeaf) }
func (e deafError) Unwrap() error { return errDeaf }

// permanent reports whether err is why this store cannot listen (errNotPgx)
// or is not heard (errDeaf), rather than a failed connection.
func permanent(err error) bool { return errors.Is(err, errNotPgx) || errors.Is(err, errDeaf) }

// unsupported is err (errNotPgx, errDeaf) as an error matching
// errors.ErrUnsupported: the Client then waits with its backoff, bounded by
// the holder's remaining lease.
func unsupported(err error) error { return driver.Unsupported("pgstore: notifications", err.Error()) }

// probeNotify proves that conn, which has run LISTEN on channel, receives
// what others send: it sends pg_notify(channel, a random payload) through b
// (the pool, as a release does) and waits up to wait, from the NOTIFY's
// commit, for that payload on conn. Other notifications that arrive
// meanwhile go to other with their channel (nil: dropped). It returns how long the
// round trip took, a deafError if the payload did not arrive while conn
// stayed open, or the error of the NOTIFY or of conn.
//
// The NOTIFY must not run on conn itself: PostgreSQL hands a session its own
// notifications before the statement's ReadyForQuery, which PgBouncer in
// transaction mode still forwards to the sender, so a self-sent probe would
// arrive through a pooler that forwards nothing else.
func probeNotify(ctx context.Context, conn *pgx.Conn, b backend, channel string, wait time.Duration, other func(channel, payload string)) (time.Duration, error) {
	payload := probePrefix + randHex(8)
	start := time.Now()
	if _, err := b.exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return 0, fmt.Errorf("probe NOTIFY: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		switch {
		case err == nil && n.Channel == channel && n.Payload == payload:
			return time.Since(start), nil
		case err == nil:
			if other != nil {
				other(n.Channel, n.Payload)
			}
		case ctx.Err() == nil && wctx.Err() != nil && !conn.IsClosed():
			return 0, deafError{wait}
		default:
			return 0, fmt.Errorf("probe: wait for the NOTIFY: %w", err)
		}
	}
}

// unlisten undoes LISTEN on conn before it is closed, best effort and
// bounded: behind a pooler in transaction mode the LISTEN stays on a
// server connection that the pooler keeps and lends to others (it may not
// be the one that runs this UNLISTEN).
func unlisten(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, "UNLISTEN *")
}
