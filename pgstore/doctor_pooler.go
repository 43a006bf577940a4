package pgstore

import (
	"context"
	"time"

	"example.com/dlock/driver"
)

// checkPooler looks for a pooler or proxy (PgBouncer) between the store and
// the server: the port the server listens on differs from the one the
// pool dials, or two consecutive transactions of one client connection ran
// on two server backends (transaction pooling).
func (s *Store) checkPooler(ctx context.Context, add addFunc) {
	pb, ok := s.db.(pgxBackend)
	if !ok {
		add("pooler", driver.OK, "not checked through database/sql")
		return
	}
	c, err := pb.pool.Acquire(ctx)
	if err != nil {
		add("pooler", driver.Fail, "%v", err)
		return
	}
	defer c.Release()
	var pid1, pid2, serverPort int64
	var app string
	err = c.QueryRow(ctx, `SELECT pg_backend_pid(), coalesce(inet_server_port(), 0), current_setting('application_name')`).Scan(&pid1, &serverPort, &app)
	if err == nil {
		err = c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid2)
	}
	if err != nil {
		add("pooler", driver.Fail, "%v", err)
		return
	}
	dialed := int64(c.Conn().Config().Port)
	switch {
	case pid1 != pid2:
		add("pooler", driver.Warn, "two transactions of one connection ran on server backends %d and %d: a pooler in transaction mode (PgBouncer) is in front; the lease table works through it (with PgBouncer 1.21+ and max_prepared_statements, or pool default_query_exec_mode=exec), but LISTEN does not, so waiters are woken by their backoff only; session locks need session pooling", pid1, pid2)
	case serverPort != 0 && serverPort != dialed:
		add("pooler", driver.Warn, "the pool dials port %d but the server listens on %d: a proxy or pooler (PgBouncer?) is in front; in session mode everything works, in transaction mode LISTEN and session locks do not", dialed, serverPort)
	default:
		add("pooler", driver.OK, "no pooler seen: one server backend per connection, server port %d", serverPort)
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

// checkProbe takes and releases a lock on a probe key, timing it.
func (s *Store) checkProbe(ctx context.Context, ttl time.Duration, add addFunc) {
	key, token := "dlock-doctor-probe-"+randHex(4), randHex(16)
	ttl = max(ttl, time.Second)
	start := time.Now()
	g, err := s.Acquire(ctx, key, token, ttl)
	if err != nil {
		add("probe lock", driver.Fail, "acquire on %s: %v", s.names.locks, err)
		return
	}
	if err := s.Release(ctx, key, token); err != nil {
		add("probe lock", driver.Fail, "release: %v", err)
		return
	}
	add("probe lock", driver.OK, "acquired and released on %s in %v (fence %d)", s.names.locks, time.Since(start).Round(time.Microsecond), g.Fence)
}
