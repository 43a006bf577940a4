package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlsession"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rwReenter serves an acquire by dig, which holds h: a re-entry, a
// downgrade or ErrUpgrade. ok is false when h was found lost (forgotten):
// the caller acquires afresh.
func (s *SessionStore) rwReenter(ctx context.Context, key string, k *rwKey, dig [32]byte, h *rwHold, mode driver.RWMode) (g driver.RWGrant, ok bool, err error) {
	if h.mode == driver.RWRead && mode == driver.RWWrite {
		return driver.RWGrant{}, true, driver.ErrUpgrade
	}
	if h.mode == driver.RWWrite && mode == driver.RWRead {
		if err := s.downgrade(ctx, key, h); err != nil {
			if errors.Is(err, sqlsession.ErrConnDead) {
				s.forgetHold(k, dig, h)
				return driver.RWGrant{}, false, nil
			}
			return driver.RWGrant{}, true, err
		}
	}
	mine, others, err := s.rwCheck(ctx, key, h)
	if err != nil {
		return driver.RWGrant{}, true, err
	}
	if !mine {
		s.forgetHold(k, dig, h)
		return driver.RWGrant{}, false, nil
	}
	return s.rwGrant(k, h, others), true, nil
}

// downgrade turns h, a write holding, into a read holding on its
// connection: the shared lock is taken (at once: the session holds the
// exclusive one) before the exclusive one is given back, so no writer gets
// in between.
func (s *SessionStore) downgrade(ctx context.Context, key string, h *rwHold) error {
	id := RWLockID(s.table, key)
	_, err := s.eng.Pins.Run(ctx, h.p, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		if _, err := c.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, id); err != nil {
			return nil, err
		}
		_, err := c.Exec(ctx, `SELECT pg_advisory_unlock($1)`, id)
		return nil, err
	}, nil)
	if err != nil {
		if errors.Is(err, sqlsession.ErrConnDead) {
			return err
		}
		// The connection may hold both locks now: close it rather than
		// guess (its holdings are lost, which the next check finds).
		s.eng.Pins.Kill(h.p)
		return classify("downgrade", err)
	}
	h.mode = driver.RWRead
	return nil
}

// rwCheck asks h's connection whether it still holds key in h's mode, and
// how many other backends hold it shared. A dead connection is not mine.
func (s *SessionStore) rwCheck(ctx context.Context, key string, h *rwHold) (mine bool, others int, err error) {
	type res struct {
		mine   bool
		others int
	}
	mode := "ShareLock"
	if h.mode == driver.RWWrite {
		mode = "ExclusiveLock"
	}
	id := RWLockID(s.table, key)
	v, err := s.eng.Pins.Run(ctx, h.p, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		var r res
		var x int64
		err := c.QueryRow(ctx, rwCheckSQL, id, cls(id), obj(id), mode).Scan(&x, &r.mine, &r.others)
		return r, err
	}, nil)
	if errors.Is(err, sqlsession.ErrConnDead) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, classify("check", err)
	}
	r := v.(res)
	return r.mine, r.others, nil
}

// forgetHold drops dig's holding h of k.
func (s *SessionStore) forgetHold(k *rwKey, dig [32]byte, h *rwHold) {
	if k.holds[dig] == h {
		delete(k.holds, dig)
		rwRegistry.CompareAndDelete(s.rwRegKey(h.key, dig), s)
		s.eng.Pins.DropLock(h.p)
	}
}

// ExtendRW implements driver.RWMutex: one statement on the holding's
// connection confirming in pg_locks that it still holds the key in its
// mode. ttl is ignored (the holding lasts as long as its connection);
// RWGrant.TTL is the check interval. A holding not found, or found lost
// (its connection died), returns driver.NotHeld(false).
func (s *SessionStore) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.RWGrant{}, err
	}
	dig := sha256.Sum256([]byte(token))
	if o := s.rwDelegate(key, dig); o != nil {
		return o.ExtendRW(ctx, key, token, ttl)
	}
	k, err := s.rwEnter(ctx, key)
	if err != nil {
		return driver.RWGrant{}, err
	}
	defer s.rwLeave(key, k, true)
	h := k.holds[dig]
	if h == nil {
		return driver.RWGrant{}, driver.NotHeld(false)
	}
	mine, others, err := s.rwCheck(ctx, key, h)
	if err != nil {
		return driver.RWGrant{}, err
	}
	if !mine {
		s.forgetHold(k, dig, h)
		return driver.RWGrant{}, driver.NotHeld(false)
	}
	return s.rwGrant(k, h, others), nil
}

// ReleaseRW implements driver.RWMutex: pg_advisory_unlock_shared or
// pg_advisory_unlock on the holding's connection. A holding not found, or
// whose connection died or no longer held it, returns driver.NotHeld(false).
// If ctx ends while the unlock runs, the call returns ctx's error and the
// holding stays recorded (a later ReleaseRW finds it gone).
func (s *SessionStore) ReleaseRW(ctx context.Context, key, token string) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dig := sha256.Sum256([]byte(token))
	if o := s.rwDelegate(key, dig); o != nil {
		return o.ReleaseRW(ctx, key, token)
	}
	k, err := s.rwEnter(ctx, key)
	if err != nil {
		return err
	}
	defer s.rwLeave(key, k, true)
	h := k.holds[dig]
	if h == nil {
		return driver.NotHeld(false)
	}
	id := RWLockID(s.table, key)
	v, err := s.eng.Pins.Run(ctx, h.p, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		var ok bool
		err := c.QueryRow(ctx, rwUnlockSQL(h.mode), id).Scan(&ok)
		return ok, err
	}, nil)
	if errors.Is(err, sqlsession.ErrConnDead) {
		s.forgetHold(k, dig, h)
		return driver.NotHeld(false)
	}
	if err != nil {
		return classify("release", err)
	}
	s.forgetHold(k, dig, h)
	if !v.(bool) {
		return driver.NotHeld(false)
	}
	return nil
}

// setMark leaves, or renews, the store's writer-waiting mark of key for
// dig: a shared lock on RWMarkID held on a pinned connection until
// driver.WriterWaitTTL after the last renewal, or until dig gets the key.
func (s *SessionStore) setMark(ctx context.Context, key string, k *rwKey, dig [32]byte) error {
	if m := k.mark; m != nil {
		m.dig, m.until = dig, time.Now().Add(driver.WriterWaitTTL)
		m.timer.Reset(driver.WriterWaitTTL)
		return nil
	}
	p, err := s.eng.Pins.Pick(ctx)
	if err != nil {
		return err
	}
	defer s.eng.Pins.Unuse(p)
	id := RWMarkID(s.table, key)
	_, err = s.eng.Pins.Run(ctx, p, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		_, err := c.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, id)
		return nil, err
	}, func(ctx context.Context, c *pgxpool.Conn, _ any, err error) {
		if err == nil {
			_, _ = c.Exec(ctx, `SELECT pg_advisory_unlock_shared($1)`, id)
		}
	})
	if err != nil {
		return classify("mark", err)
	}
	s.eng.Pins.AddLock(p)
	m := &rwMark{dig: dig, p: p, until: time.Now().Add(driver.WriterWaitTTL)}
	m.timer = time.AfterFunc(driver.WriterWaitTTL, func() { s.markExpired(key, m) })
	k.mark = m
	return nil
}

// markExpired drops m, key's mark, if it was not renewed since its timer
// was set.
func (s *SessionStore) markExpired(key string, m *rwMark) {
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
	defer cancel()
	k, err := s.rwEnter(ctx, key)
	if err != nil {
		return // closed: Close gave the connection back, unlocked
	}
	defer s.rwLeave(key, k, true)
	if k.mark == m && !time.Now().Before(m.until) {
		s.dropMark(key, k)
	}
}

// dropMark gives k's mark back; a connection that cannot unlock it is
// closed, which frees it too.
func (s *SessionStore) dropMark(key string, k *rwKey) {
	m := k.mark
	k.mark = nil
	m.timer.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
	defer cancel()
	id := RWMarkID(s.table, key)
	_, err := s.eng.Pins.Run(ctx, m.p, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		_, err := c.Exec(ctx, `SELECT pg_advisory_unlock_shared($1)`, id)
		return nil, err
	}, nil)
	if err != nil && !errors.Is(err, sqlsession.ErrConnDead) {
		s.eng.Pins.Kill(m.p)
	}
	s.eng.Pins.DropLock(m.p)
}
