package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A semaphore key K is the holdings under famPfx(semTag, K) + "h/", one
// key per token, named after its digest, valued "dlock/sem1 <n> <k>": the
// limit it was taken under and its permits. The limit is not kept apart:
// it is the n of the live holdings (all the same, checked at admission),
// so it goes with the last of them, even with a crashed holder's session.

const semValuePrefix = "dlock/sem1 "

var (
	_ driver.Semaphore       = (*Store)(nil)
	_ driver.PermitNotifier  = (*Store)(nil)
	_ driver.PermitInspector = (*Store)(nil)
)

// semHolding is one holding key of a semaphore, parsed.
type semHolding struct {
	kv   *mvccpb.KeyValue
	n, k int
}

func semValue(n, k int) string { return semValuePrefix + strconv.Itoa(n) + " " + strconv.Itoa(k) }

func parseSem(kv *mvccpb.KeyValue) (semHolding, error) {
	f := strings.Fields(strings.TrimPrefix(string(kv.Value), semValuePrefix))
	if !strings.HasPrefix(string(kv.Value), semValuePrefix) || len(f) != 2 {
		return semHolding{}, fmt.Errorf("%w: etcdstore: key %q holds %q, not a semaphore holding", driver.ErrRefused, kv.Key, kv.Value)
	}
	n, err1 := strconv.Atoi(f[0])
	k, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || n < 1 || k < 1 || k > n {
		return semHolding{}, fmt.Errorf("%w: etcdstore: key %q holds %q, not a semaphore holding", driver.ErrRefused, kv.Key, kv.Value)
	}
	return semHolding{kv: kv, n: n, k: k}, nil
}

// semState is a semaphore key as one read saw it.
type semState struct {
	own         *semHolding // the token's holding, if any
	limit, used int
	all         []semHolding
}

func readSem(kvs []*mvccpb.KeyValue, own string) (semState, error) {
	var st semState
	for _, kv := range kvs {
		h, err := parseSem(kv)
		if err != nil {
			return semState{}, err
		}
		st.all = append(st.all, h)
		st.used += h.k
		st.limit = h.n // equal for all (admission checks it)
		if string(kv.Key) == own {
			st.own = &st.all[len(st.all)-1]
		}
	}
	return st, nil
}

// semKeys returns the prefix of key's holdings and the token's key.
func (s *Store) semKeys(key, token string) (hpfx, own string) {
	hpfx = s.famPfx(semTag, key) + "h/"
	return hpfx, hpfx + digest(token)
}

// AcquirePermits implements driver.Semaphore: one transaction that puts the
// token's holding if the key has none (the uncontended case, one round
// trip), else reads the holdings; then, while permits are free, a
// transaction that puts it only if no holding was created since that read,
// so that two acquirers can never both take the last permits. The holding
// is on the store's session lease: ttl is ignored and it lasts as long as
// the session (PermitGrant.TTL is the session's certain life). Its fence is
// the holding key's CreateRevision. A refused call returns a
// *driver.PermitsTakenError with Remaining -1 (a session has no fixed end)
// and changes nothing. If the session's lease is gone (revoked or expired),
// nothing is put with it: the call goes on with a new session.
func (s *Store) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	if err := driver.ValidatePermits(key, n, k, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	start := time.Now()
	hpfx, own := s.semKeys(key, token)
	guard := fresh(hpfx)
	for range famAttempts {
		sess, err := s.session(ctx)
		if err != nil {
			return driver.PermitGrant{}, authRefused(err)
		}
		put, rev, kvs, err := s.putIf(ctx, sess, []clientv3.Cmp{guard}, own, semValue(n, k), hpfx)
		if errors.Is(err, errSessionGone) {
			continue
		}
		if err != nil {
			return driver.PermitGrant{}, fmt.Errorf("etcdstore: acquire permits of %q: %w", key, err)
		}
		st, err := readSem(kvs, own)
		if err != nil {
			return driver.PermitGrant{}, err
		}
		if put {
			return driver.PermitGrant{Fence: uint64(rev), Permits: k, Used: st.used, TTL: s.certainTTL(sess, start)}, nil
		}
		switch {
		case st.own != nil:
			g, err := s.semReentry(ctx, sess, st, n, k, start)
			if errors.Is(err, errChanged) {
				guard = fresh(hpfx) // its lease ended meanwhile: read again
				continue
			}
			return g, err
		case st.limit != 0 && st.limit != n:
			return driver.PermitGrant{}, &driver.LimitMismatchError{Stored: st.limit, Asked: n}
		case st.used+k > n:
			return driver.PermitGrant{}, &driver.PermitsTakenError{Used: st.used, Limit: n, Remaining: -1}
		}
		guard = s.admitGuard(hpfx, own, rev)
	}
	return driver.PermitGrant{}, fmt.Errorf("etcdstore: acquire permits of %q: the holdings kept changing under %d attempts (nothing taken)", key, famAttempts)
}

// semReentry answers an AcquirePermits by a token that holds key already:
// the same holding, if asked with the same n and k.
func (s *Store) semReentry(ctx context.Context, sess *session, st semState, n, k int, start time.Time) (driver.PermitGrant, error) {
	switch {
	case st.own.n != n:
		return driver.PermitGrant{}, &driver.LimitMismatchError{Stored: st.own.n, Asked: n}
	case st.own.k != k:
		return driver.PermitGrant{}, fmt.Errorf("%w: the token holds %d permits of the key, asked again for %d", driver.ErrInvalid, st.own.k, k)
	}
	ttl, err := s.holdTTL(ctx, sess, clientv3.LeaseID(st.own.kv.Lease), start)
	if err != nil {
		return driver.PermitGrant{}, err
	}
	return driver.PermitGrant{Fence: uint64(st.own.kv.CreateRevision), Permits: k, Used: st.used, TTL: ttl}, nil
}

// ExtendPermits implements driver.Semaphore: one keepalive of the session
// (shared with concurrent renewals: it renews every holding of the store)
// and one read confirming the token's holding. ttl is ignored, as for
// AcquirePermits. If token holds no permit of key it returns
// driver.NotHeld(false); an error matching no sentinel leaves the holding
// as alive as the session's certain life.
func (s *Store) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	start := time.Now()
	sess, err := s.renewed(ctx)
	if err != nil {
		return driver.PermitGrant{}, err
	}
	hpfx, own := s.semKeys(key, token)
	resp, err := s.cli.Get(ctx, hpfx, clientv3.WithPrefix())
	if err != nil {
		return driver.PermitGrant{}, fmt.Errorf("etcdstore: extend permits of %q: %w", key, err)
	}
	st, err := readSem(resp.Kvs, own)
	if err != nil {
		return driver.PermitGrant{}, err
	}
	if st.own == nil {
		return driver.PermitGrant{}, driver.NotHeld(false)
	}
	left, err := s.holdTTL(ctx, sess, clientv3.LeaseID(st.own.kv.Lease), start)
	if errors.Is(err, errChanged) {
		return driver.PermitGrant{}, driver.NotHeld(false)
	}
	if err != nil {
		return driver.PermitGrant{}, err
	}
	return driver.PermitGrant{Fence: uint64(st.own.kv.CreateRevision), Permits: st.own.k, Used: st.used, TTL: left}, nil
}

// ReleasePermits implements driver.Semaphore: one transaction deleting the
// token's holding if it exists (from any Store: the key is named after the
// token). If there is none it returns driver.NotHeld(false). A ctx that has
// already ended returns its error at once, sending nothing: the holding
// lives on with the session, as a Mutex holding does.
func (s *Store) ReleasePermits(ctx context.Context, key, token string) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("etcdstore: release permits of %q: nothing sent, the permits are still held: %w", key, err)
	}
	_, own := s.semKeys(key, token)
	ok, err := s.deleteIfPresent(ctx, own)
	if err != nil {
		return fmt.Errorf("etcdstore: release permits of %q: %w", key, err)
	}
	if !ok {
		return driver.NotHeld(false)
	}
	return nil
}

// SubscribePermits implements driver.PermitNotifier with a watch of key's
// holdings: every deletion of one (a release, or a session ending) sends a
// value. It returns once the watch is registered on the server.
func (s *Store) SubscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := driver.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	hpfx, _ := s.semKeys(key, "")
	return s.subscribe(ctx, hpfx, func(e *clientv3.Event) bool { return e.Type == mvccpb.DELETE })
}

// InspectPermits implements driver.PermitInspector: one read of key's
// holdings, then the remaining time of each session holding them. Token is
// empty: etcd keeps a digest of it only.
func (s *Store) InspectPermits(ctx context.Context, key string) (driver.PermitInfo, error) {
	if err := driver.ValidateKey(key); err != nil {
		return driver.PermitInfo{}, err
	}
	hpfx, _ := s.semKeys(key, "")
	resp, err := s.cli.Get(ctx, hpfx, clientv3.WithPrefix())
	if err != nil {
		return driver.PermitInfo{}, fmt.Errorf("etcdstore: inspect permits of %q: %w", key, err)
	}
	st, err := readSem(resp.Kvs, "")
	if err != nil {
		return driver.PermitInfo{}, err
	}
	ttls, err := s.leaseTTLs(ctx, resp.Kvs)
	if err != nil {
		return driver.PermitInfo{}, fmt.Errorf("etcdstore: inspect permits of %q: %w", key, err)
	}
	info := driver.PermitInfo{Limit: st.limit, Used: st.used}
	for _, h := range st.all {
		if left, ok := ttls[h.kv.Lease]; ok {
			info.Holders = append(info.Holders, driver.PermitHolder{Permits: h.k, Fence: uint64(h.kv.CreateRevision), Remaining: left})
		}
	}
	return info, nil
}
