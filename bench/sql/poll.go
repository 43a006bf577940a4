package main

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// Settings of the polling peer: Spring Integration's JdbcLockRegistry
// defaults (DefaultLockRepository's TTL, JdbcLockRegistry's idleBetweenTries).
const (
	pollTTL    = 10 * time.Second
	pollPeriod = 100 * time.Millisecond
	pollRegion = "DEFAULT"
	pollTable  = "int_lock"
)

// pollSchema is INT_LOCK as Spring ships it (schema-postgresql.sql and
// schema-mysql.sql), lower-cased.
func pollSchema(db string) string {
	ts := "TIMESTAMP"
	if db == dbMySQL {
		ts = "DATETIME(6)"
	}
	return `CREATE TABLE IF NOT EXISTS ` + pollTable + ` (
	lock_key CHAR(36) NOT NULL,
	region VARCHAR(100) NOT NULL,
	client_id CHAR(36),
	created_date ` + ts + ` NOT NULL,
	expired_after ` + ts + ` NOT NULL,
	PRIMARY KEY (lock_key, region))`
}

// pollRegistry is a hand-written JdbcLockRegistry: per process one client
// id (a random UUID) and, per key, a local lock (JdbcLock's ReentrantLock)
// that a goroutine takes before it polls the table, so only one goroutine
// per process and key talks to the database. Acquire is Spring's
// DefaultLockRepository.acquire in one READ COMMITTED transaction:
//
//	UPDATE int_lock SET client_id=?, expired_after=? WHERE region=? AND lock_key=?
//	  AND (client_id=? OR expired_after<?)
//	-- no row updated:
//	INSERT INTO int_lock (...) VALUES (...)   -- duplicate key: not acquired
//
// with times from the client's clock (now + 10 s), retried every 100 ms.
// On PostgreSQL the INSERT carries ON CONFLICT DO NOTHING (the setting
// Spring's reference documentation recommends there, so a duplicate does not
// abort the transaction). Release is one DELETE ... AND client_id=?.
// Deadlocks and serialization failures are retried, as Spring's JdbcLock
// retries TransientDataAccessException; transient counts them.
type pollRegistry struct {
	db        *sql.DB
	dialect   string
	clientID  string
	mu        sync.Mutex
	local     map[string]chan struct{}
	transient atomic.Int64
	upd, ins  string
	del       string
}

func newPollRegistry(db *sql.DB, dialect string) *pollRegistry {
	p := &pollRegistry{db: db, dialect: dialect, clientID: randomUUID(), local: map[string]chan struct{}{}}
	p.upd = `UPDATE ` + pollTable + ` SET client_id=?, expired_after=? WHERE region=? AND lock_key=? AND (client_id=? OR expired_after<?)`
	p.ins = `INSERT INTO ` + pollTable + ` (region, lock_key, client_id, created_date, expired_after) VALUES (?, ?, ?, ?, ?)`
	p.del = `DELETE FROM ` + pollTable + ` WHERE region=? AND lock_key=? AND client_id=?`
	if dialect == dbPG {
		p.upd = `UPDATE ` + pollTable + ` SET client_id=$1, expired_after=$2 WHERE region=$3 AND lock_key=$4 AND (client_id=$5 OR expired_after<$6)`
		p.ins = `INSERT INTO ` + pollTable + ` (region, lock_key, client_id, created_date, expired_after) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`
		p.del = `DELETE FROM ` + pollTable + ` WHERE region=$1 AND lock_key=$2 AND client_id=$3`
	}
	return p
}

func (p *pollRegistry) localLock(key string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.local[key]
	if !ok {
		l = make(chan struct{}, 1)
		p.local[key] = l
	}
	return l
}

// lock takes key: the local lock, then the row, polling every 100 ms.
func (p *pollRegistry) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l := p.localLock(key)
	select {
	case l <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	lk := uuidFromName(key)
	for {
		ok, err := p.acquire(ctx, lk)
		switch {
		case ok:
			return func(ctx context.Context) error {
				defer func() { <-l }()
				_, err := p.db.ExecContext(ctx, p.del, pollRegion, lk, p.clientID)
				return err
			}, nil
		case err != nil && transientSQL(err):
			p.transient.Add(1)
			continue
		case err != nil:
			<-l
			return nil, err
		}
		t := time.NewTimer(pollPeriod)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			<-l
			return nil, ctx.Err()
		}
	}
}

// acquire is DefaultLockRepository.acquire: one transaction, UPDATE then
// INSERT.
func (p *pollRegistry) acquire(ctx context.Context, lk string) (ok bool, err error) {
	tx, err := p.db.BeginTx(ctx, nil) // READ COMMITTED: the default (PostgreSQL) or set per connection (MariaDB)
	if err != nil {
		return false, err
	}
	defer func() {
		if !ok {
			_ = tx.Rollback()
		}
	}()
	now := time.Now().UTC()
	res, err := tx.ExecContext(ctx, p.upd, p.clientID, now.Add(pollTTL), pollRegion, lk, p.clientID, now)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return false, err
		}
		res, err = tx.ExecContext(ctx, p.ins, pollRegion, lk, p.clientID, now, now.Add(pollTTL))
		if isDuplicate(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// transientSQL reports a deadlock, a lock wait timeout or a serialization
// failure: errors Spring's JdbcLock retries.
func transientSQL(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	return false
}

// uuidFromName is Java's UUID.nameUUIDFromBytes (MD5, version 3), what
// Spring's UUIDConverter makes of a lock name.
func uuidFromName(name string) string {
	h := md5.Sum([]byte(name))
	h[6] = h[6]&0x0f | 0x30
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
