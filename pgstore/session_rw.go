package pgstore

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The read-write lock of the session store: a read holding is
// pg_try_advisory_lock_shared(RWLockID), a write holding
// pg_try_advisory_lock(RWLockID), each on a pinned connection, with a
// fence from the sequence in the same statement. A writer-waiting mark is
// a shared advisory lock on RWMarkID held on a pinned connection for
// driver.WriterWaitTTL after the writer's last refused try; a new reader
// is refused while another backend holds one. A backend waiting in
// pg_advisory_lock(RWLockID) (psql, or any program) keeps new readers out
// too: PostgreSQL refuses a lock that conflicts with a queued request.

var _ driver.RWMutex = (*SessionStore)(nil)

// RWLockID is the advisory lock id of the read-write lock key under the
// table prefix: LockID(table+"\x00rw", key), apart from the Mutex's
// LockID(table, key), so that the two primitives' keys are unrelated.
// Another program reads key with pg_advisory_lock_shared(RWLockID(table,
// key)) and writes it with pg_advisory_lock(RWLockID(table, key)).
func RWLockID(table, key string) int64 { return LockID(table+"\x00rw", key) }

// RWMarkID is the advisory lock id of key's writer-waiting marks: a
// writer refused by the store holds it shared for driver.WriterWaitTTL.
func RWMarkID(table, key string) int64 { return LockID(table+"\x00rwmark", key) }

const (
	// rwReadSQL: -2 when another backend holds a mark or a backend waits
	// for the exclusive lock (checked here, as PostgreSQL does not when
	// the connection holds the shared lock already for another reader),
	// else the fence or NULL; and the shared holdings of other backends.
	rwReadSQL = `WITH t AS MATERIALIZED (SELECT CASE
  WHEN EXISTS (SELECT 1 FROM pg_locks WHERE granted AND pid <> pg_backend_pid() AND ` + rwMarkWhere + `) THEN -2
  WHEN ` + rwQueuedCheck + ` THEN -2
  WHEN pg_try_advisory_lock_shared($1) THEN nextval($4::regclass) END AS f)
SELECT t.f, (SELECT count(*) FROM pg_locks WHERE granted AND mode = 'ShareLock' AND pid <> pg_backend_pid() AND ` + rwWhere + `) FROM t`
	rwQueuedCheck = `EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND mode = 'ExclusiveLock' AND ` + rwWhere + `)`
	rwWriteSQL    = `SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval($2::regclass) END`
	// rwStateSQL: granted shared holdings, granted exclusive ones, marks
	// (of any backend) and queued exclusive requests.
	rwStateSQL = `SELECT $1::bigint, $4::text,
  (SELECT count(*) FROM pg_locks WHERE granted AND mode = 'ShareLock' AND ` + rwWhere + `),
  (SELECT count(*) FROM pg_locks WHERE granted AND mode = 'ExclusiveLock' AND ` + rwWhere + `),
  (SELECT count(*) FROM pg_locks WHERE granted AND ` + rwMarkWhere + `),
  (SELECT count(*) FROM pg_locks WHERE NOT granted AND mode = 'ExclusiveLock' AND ` + rwWhere + `)`
	// rwCheckSQL: does this backend hold the lock in mode $4, and the
	// shared holdings of other backends.
	rwCheckSQL = `SELECT $1::bigint,
  EXISTS (SELECT 1 FROM pg_locks WHERE granted AND pid = pg_backend_pid() AND mode = $4::text AND ` + rwWhere + `),
  (SELECT count(*) FROM pg_locks WHERE granted AND mode = 'ShareLock' AND pid <> pg_backend_pid() AND ` + rwWhere + `)`
	rwWhere = `locktype = 'advisory' AND classid = $2 AND objid = $3 AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	rwMarkWhere = `locktype = 'advisory' AND classid = $5 AND objid = $6 AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
)

// rwKey is the store's state of one read-write key: its holdings by token
// digest and its mark. It is guarded by the key's call slot (rwEnter).
type rwKey struct {
	slot  chan struct{}
	refs  int // guarded by SessionStore.rwMu
	holds map[[32]byte]*rwHold
	mark  *rwMark
}

type rwHold struct {
	key   string
	mode  driver.RWMode
	fence uint64
	p     *pinned
}

// rwMark is a writer-waiting mark of the token digest dig, held on p
// until until (renewed by the writer's retries).
type rwMark struct {
	dig   [32]byte
	p     *pinned
	until time.Time
	timer *time.Timer
}

func (k *rwKey) readers() int {
	n := 0
	for _, h := range k.holds {
		if h.mode == driver.RWRead {
			n++
		}
	}
	return n
}

// rwEnter takes key's call slot, waiting for the call on it under way.
func (s *SessionStore) rwEnter(ctx context.Context, key string) (*rwKey, error) {
	if s.eng.Closed() {
		return nil, errSessionClosed
	}
	s.rwMu.Lock()
	if s.rwKeys == nil {
		s.rwKeys = map[string]*rwKey{}
	}
	k := s.rwKeys[key]
	if k == nil {
		k = &rwKey{slot: make(chan struct{}, 1), holds: map[[32]byte]*rwHold{}}
		s.rwKeys[key] = k
	}
	k.refs++
	s.rwMu.Unlock()
	select {
	case k.slot <- struct{}{}:
		return k, nil
	case <-ctx.Done():
		s.rwLeave(key, k, false)
		return nil, ctx.Err()
	}
}

// rwLeave gives the slot up (if taken) and forgets an idle key.
func (s *SessionStore) rwLeave(key string, k *rwKey, taken bool) {
	if taken {
		<-k.slot
	}
	s.rwMu.Lock()
	k.refs--
	if k.refs == 0 && len(k.holds) == 0 && k.mark == nil && s.rwKeys[key] == k {
		delete(s.rwKeys, key)
	}
	s.rwMu.Unlock()
}

// rwArgs are the statements' arguments for key: $1 the lock id, $2 $3 its
// pg_locks parts, $4 the sequence, $5 $6 the mark's pg_locks parts.
func (s *SessionStore) rwArgs(key string) []any {
	id, mk := RWLockID(s.table, key), RWMarkID(s.table, key)
	return []any{id, cls(id), obj(id), s.seq, cls(mk), obj(mk)}
}

// AcquireRead implements driver.RWMutex: one statement on a pinned
// connection (pg_try_advisory_lock_shared on RWLockID, refused while
// another backend holds a writer-waiting mark of key, with a fence). A
// re-entry checks the holding on its connection; the writer's AcquireRead
// downgrades on its connection (shared taken, then exclusive given back:
// no writer slips in between). ttl is ignored: the holding lasts as long
// as its connection; RWGrant.TTL is the check interval. A refusal is a
// *driver.RWTakenError with Remaining -1; a refusal by a backend queued in
// pg_advisory_lock shows as WriterWaiting.
func (s *SessionStore) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.rwAcquire(ctx, key, token, ttl, driver.RWRead)
}

// AcquireWrite implements driver.RWMutex: one statement on a pinned
// connection (pg_try_advisory_lock on RWLockID, with a fence). Refused, it
// leaves or renews the store's mark of key (a shared lock on RWMarkID for
// driver.WriterWaitTTL) and returns a *driver.RWTakenError; by a reader of
// key it returns driver.ErrUpgrade, changing nothing.
func (s *SessionStore) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.rwAcquire(ctx, key, token, ttl, driver.RWWrite)
}

func (s *SessionStore) rwAcquire(ctx context.Context, key, token string, ttl time.Duration, mode driver.RWMode) (driver.RWGrant, error) {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.RWGrant{}, err
	}
	dig := sha256.Sum256([]byte(token))
	if o := s.rwDelegate(key, dig); o != nil {
		return o.rwAcquire(ctx, key, token, ttl, mode)
	}
	k, err := s.rwEnter(ctx, key)
	if err != nil {
		return driver.RWGrant{}, err
	}
	defer s.rwLeave(key, k, true)
	if h := k.holds[dig]; h != nil {
		if g, ok, err := s.rwReenter(ctx, key, k, dig, h, mode); ok || err != nil {
			return g, err
		}
	}
	if localRefusal(k, mode) {
		return driver.RWGrant{}, s.refused(ctx, key, k, dig, mode)
	}
	p, err := s.eng.Pins.Pick(ctx)
	if err != nil {
		return driver.RWGrant{}, err
	}
	defer s.eng.Pins.Unuse(p)
	fence, others, err := s.rwTry(ctx, p, key, mode)
	if err != nil || fence == 0 {
		if err == nil {
			err = s.refused(ctx, key, k, dig, mode)
		}
		return driver.RWGrant{}, err
	}
	s.eng.Pins.AddLock(p)
	k.holds[dig] = &rwHold{key: key, mode: mode, fence: fence, p: p}
	rwRegistry.Store(s.rwRegKey(key, dig), s)
	if mode == driver.RWWrite && k.mark != nil && k.mark.dig == dig {
		s.dropMark(key, k)
	}
	return s.rwGrant(k, k.holds[dig], others), nil
}

// localRefusal reports whether the store's own state refuses mode with no
// I/O: a local writer, local readers for a writer, or the store's own live
// mark for a reader.
func localRefusal(k *rwKey, mode driver.RWMode) bool {
	for _, h := range k.holds {
		if h.mode == driver.RWWrite || mode == driver.RWWrite {
			return true
		}
	}
	return mode == driver.RWRead && k.mark != nil
}

// rwTry runs the acquire statement on p: the fence (0: refused) and the
// shared holdings of other backends. A lock taken after ctx ended is given
// back when the statement completes.
func (s *SessionStore) rwTry(ctx context.Context, p *pinned, key string, mode driver.RWMode) (uint64, int, error) {
	type res struct {
		fence  *int64
		others int
	}
	args := s.rwArgs(key)
	v, err := s.eng.Pins.Run(ctx, p, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		var r res
		var err error
		if mode == driver.RWRead {
			q := rwReadSQL
			if s.noQueuedCheck {
				q = strings.Replace(q, rwQueuedCheck, "false", 1)
			}
			err = c.QueryRow(ctx, q, args...).Scan(&r.fence, &r.others)
		} else {
			err = c.QueryRow(ctx, rwWriteSQL, args[0], args[3]).Scan(&r.fence)
		}
		return r, err
	}, func(ctx context.Context, c *pgxpool.Conn, v any, err error) {
		if r, _ := v.(res); err == nil && r.fence != nil && *r.fence > 0 {
			if _, err := c.Exec(ctx, rwUnlockSQL(mode), args[0]); err != nil {
				_ = c.Conn().Close(ctx)
			}
		}
	})
	if err != nil {
		return 0, 0, classify("acquire", err)
	}
	r := v.(res)
	if r.fence == nil || *r.fence <= 0 {
		return 0, r.others, nil
	}
	return uint64(*r.fence), r.others, nil
}

func rwUnlockSQL(mode driver.RWMode) string {
	if mode == driver.RWRead {
		return `SELECT pg_advisory_unlock_shared($1)`
	}
	return `SELECT pg_advisory_unlock($1)`
}

// rwGrant is h's grant; others is the count of other backends holding the
// key shared, among them the store's own other connections, whose readers
// are counted by token instead.
func (s *SessionStore) rwGrant(k *rwKey, h *rwHold, others int) driver.RWGrant {
	g := driver.RWGrant{Mode: h.mode, Fence: h.fence, TTL: s.ttl}
	if h.mode == driver.RWRead {
		g.Readers = max(others-len(readConns(k, h.p)), 0) + k.readers()
	}
	return g
}

// readConns are the connections holding k's read holdings, but not.
func readConns(k *rwKey, not *pinned) map[*pinned]bool {
	conns := map[*pinned]bool{}
	for _, h := range k.holds {
		if h.mode == driver.RWRead && h.p != not {
			conns[h.p] = true
		}
	}
	return conns
}

// refused builds the refusal of a call by dig in mode from pg_locks and
// the store's own holdings (readers are counted by token: one connection
// holds the shared lock of all the store's readers it serves) and, for a
// writer, leaves or renews the store's mark of key.
func (s *SessionStore) refused(ctx context.Context, key string, k *rwKey, dig [32]byte, mode driver.RWMode) error {
	var shared, excl, marks, queued int
	var id int64
	var seq string
	if err := s.pool.QueryRow(ctx, rwStateSQL, s.rwArgs(key)...).Scan(&id, &seq, &shared, &excl, &marks, &queued); err != nil {
		return classify("inspect", err)
	}
	w := &driver.RWTakenError{Readers: max(shared-len(readConns(k, nil)), 0) + k.readers(), WriterWaiting: marks > 0 || queued > 0 || k.mark != nil, Remaining: -1}
	switch {
	case excl > 0:
		w.Held, w.Readers = driver.RWWrite, 0
	case w.Readers > 0:
		w.Held = driver.RWRead
	}
	if mode == driver.RWWrite {
		if err := s.setMark(ctx, key, k, dig); err != nil {
			return err
		}
		w.WriterWaiting = true
	}
	return w
}

// rwRegistry maps a read-write holding of this process (database, table
// prefix, key, token digest) to the store holding it, so that a token
// taken through one store value is served through another, as registry
// does for the Mutex.
var rwRegistry sync.Map

func (s *SessionStore) rwRegKey(key string, dig [32]byte) string {
	return s.regKey(key) + "\x00" + string(dig[:])
}

// rwDelegate returns another store of this process holding key for dig,
// or nil.
func (s *SessionStore) rwDelegate(key string, dig [32]byte) *SessionStore {
	v, ok := rwRegistry.Load(s.rwRegKey(key, dig))
	if !ok || v.(*SessionStore) == s || v.(*SessionStore).eng.Closed() {
		return nil
	}
	return v.(*SessionStore)
}
