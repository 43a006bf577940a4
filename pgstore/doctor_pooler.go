package pgstore

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// checkPooler looks for a pooler or proxy (PgBouncer) between the store and
// the server, and tells which pool mode it sees as far as a client can
// (PgBouncer's SHOW CONFIG needs its admin console): a BEGIN refused with
// PgBouncer's "statement pooling mode" error (statement pooling); two
// client connections that share or swap server backends while a
// transaction is allowed (transaction pooling, see samplePIDs); a new
// client connection given an older server backend (session pooling, see
// reusedBackend); or a server port that differs from the one the pool
// dials (a TCP proxy, or session pooling that reusedBackend missed).
// PgBouncer in transaction mode hands a client the backend it used last, so
// one connection alone sees one backend: the sample takes two.
func (s *Store) checkPooler(ctx context.Context, add addFunc) {
	pb, ok := s.db.(pgxBackend)
	if !ok {
		add("pooler", driver.OK, "not checked through database/sql (the notifications check still sees a pooler in transaction mode)")
		return
	}
	c, err := pb.pool.Acquire(ctx)
	if err != nil {
		add("pooler", driver.Fail, "%v", err)
		return
	}
	defer c.Release()
	var serverPort int64
	if err := c.QueryRow(ctx, `SELECT coalesce(inet_server_port(), 0)`).Scan(&serverPort); err != nil {
		add("pooler", driver.Fail, "%v", err)
		return
	}
	pids, err := samplePIDs(ctx, c, pb.pool, DefaultConnWait)
	if statementPooling(err) {
		add("pooler", driver.Warn, "a second client connection's BEGIN was refused (%v): a pooler in statement mode, PgBouncer with pool_mode = statement, refuses transactions and shares server sessions between clients. "+
			"The lease table works through it when the pool keeps no prepared statement across statements (default_query_exec_mode=exec in the pool's URL): each of its calls is one statement. "+
			"LISTEN hears nothing through it: waiters back off instead of being woken at the release. "+
			"The row lock (WithRowLock) and session locks (mode=session) refuse to run (ErrStatementPooling, ErrSharedSession)", err)
		return
	}
	if err != nil {
		add("pooler", driver.Fail, "%v", err)
		return
	}
	dialed := int64(c.Conn().Config().Port)
	switch {
	case sharedPIDs(pids):
		add("pooler", driver.Warn, "two client connections ran on server backends %d, %d, %d (the first and last on one connection) and a transaction was allowed: a pooler in transaction mode, PgBouncer, shares server sessions between clients. "+
			"The lease table works through it when the pool keeps no prepared statement across transactions (default_query_exec_mode=exec in the pool's URL, or PgBouncer 1.21+ with max_prepared_statements). "+
			"LISTEN hears nothing through it: the store's listener finds that out with a probe and waiters back off instead (the Client's backoff, 250 ms at most by default, never past the holder's lease) rather than being woken at the release. "+
			"Session locks (mode=session) refuse to run (ErrSharedSession): they need session pooling or a direct connection", pids[0], pids[1], pids[2])
	case reusedBackend(ctx, pb.pool):
		add("pooler", driver.Warn, "a pooler in session mode (PgBouncer pool_mode = session) is in front: a new client connection was given a server backend started before it, which only a pooler that keeps server connections does, and two client connections kept backends of their own (%d, %d), as session pooling does (not transaction pooling). "+
			"Locks, LISTEN, the row lock and session locks work through it. Each client connection holds a server connection for its life: the store's listener one while anyone waits, each session-lock connection one", pids[0], pids[1])
	case serverPort != 0 && serverPort != dialed:
		add("pooler", driver.Warn, "the pool dials port %d but the server listens on %d: a proxy or a pooler is in front; two client connections kept server backends of their own (%d, %d), as session pooling or a TCP proxy does, so locks, LISTEN and session locks work through it. "+
			"With session pooling each client connection holds a server connection for its life: the store's listener one while anyone waits, each session-lock connection one", dialed, serverPort, pids[0], pids[1])
	default:
		add("pooler", driver.OK, "no pooler seen: server port %d, and two client connections kept backends of their own (%d, %d)", serverPort, pids[0], pids[1])
	}
}

// reuseTries bounds the connections reusedBackend opens and closes.
const reuseTries = 3

// reusedBackend reports whether a new client connection is given a server
// backend that started before it: it reads the server's clock on a
// connection of its own, closes it, and asks a second new connection
// whether its backend started before that moment. Without a pooler, or
// through a TCP proxy, every connection gets a new backend; PgBouncer in
// session mode gives the closed connection's backend, once reset, to the
// next client. It tries up to reuseTries times (the pooler may still be
// resetting the backend when the next client arrives) and reports false
// when no try shows a reuse or a connection fails.
func reusedBackend(ctx context.Context, pool *pgxpool.Pool) bool {
	for range reuseTries {
		var closed time.Time
		if err := onNewConn(ctx, pool, `SELECT clock_timestamp()`, nil, &closed); err != nil {
			return false
		}
		var reused bool
		if err := onNewConn(ctx, pool, `SELECT backend_start < $1 FROM pg_stat_activity WHERE pid = pg_backend_pid()`, []any{closed}, &reused); err != nil {
			return false
		}
		if reused {
			return true
		}
	}
	return false
}

// onNewConn runs q on a new connection with pool's settings, scans its row
// into dest and closes the connection.
func onNewConn(ctx context.Context, pool *pgxpool.Pool, q string, args []any, dest ...any) error {
	c, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	return c.QueryRow(ctx, q, args...).Scan(dest...)
}

// checkNotify proves that a release's NOTIFY reaches a listening
// connection, as the store's listener does (probeNotify), on a channel of
// its own so that no other listener hears the probe.
func (s *Store) checkNotify(ctx context.Context, add addFunc) {
	conn, release, err := s.db.listenConn(ctx)
	if errors.Is(err, errNotPgx) {
		add("notifications", driver.Warn, "%v: waiters back off (the Client's backoff, bounded by the holder's lease) instead of being woken at a release", err)
		return
	}
	if err != nil {
		add("notifications", driver.Fail, "open a listening connection: %v", err)
		return
	}
	defer release()
	channel := "dlock_doctor_" + randHex(8)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		add("notifications", driver.Fail, "LISTEN: %v", err)
		return
	}
	d, err := probeNotify(ctx, conn, s.db, channel, listenProbe, nil)
	unlisten(conn)
	switch {
	case errors.Is(err, errDeaf):
		add("notifications", driver.Warn, "%v. The store's listener sees the same and reports notifications unsupported: waiters back off (the Client's backoff, 250 ms at most by default, never past the holder's lease) instead of being woken at a release. Point the store at the server or at a pooler in session mode to get wake-ups", err)
	case err != nil:
		add("notifications", driver.Fail, "%v", err)
	default:
		add("notifications", driver.OK, "a NOTIFY sent through the pool reached a listening connection in %v: waiters are woken at a release", d.Round(time.Microsecond))
	}
}

// checkReplicas reports the primary's replicas and their replay lag: a
// failover to an asynchronous replica loses the lock rows it had not
// replayed, and a lock taken then can be taken again.
func (s *Store) checkReplicas(ctx context.Context, add addFunc) {
	var n, syncN int64
	var lag float64
	var syncNames string
	err := s.db.queryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')),
  coalesce(extract(epoch FROM max(replay_lag)), 0)::float8, current_setting('synchronous_standby_names')
FROM pg_stat_replication`, nil, &n, &syncN, &lag, &syncNames)
	if err != nil {
		add("replication", driver.Warn, "pg_stat_replication: %v", err)
		return
	}
	lagD := time.Duration(lag * float64(time.Second)).Round(time.Millisecond)
	switch {
	case n == 0:
		add("replication", driver.OK, "no replicas stream from this server: a crash keeps committed locks (if fsync is on) and a restart keeps them")
	case syncN == 0:
		add("replication", driver.Warn, "%d asynchronous replicas, replay lag up to %v: after a failover, locks and fences issued in the last moments before it may be lost and issued again (fences too: the sequence replicates the same way); use synchronous replication (synchronous_standby_names) for locks that guard irreversible work", n, lagD)
	default:
		add("replication", driver.OK, "%d replicas, %d synchronous (%s), replay lag up to %v", n, syncN, syncNames, lagD)
	}
}
