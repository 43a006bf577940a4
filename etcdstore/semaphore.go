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
// key per holding, named <lease hex>_<n> as the Mutex's keys are (newName:
// names are reused, so etcd's index does not grow with every holding),
// valued "dlock/sem1 <n> <k> <token digest>": the limit it was taken under,
// its permits and whose it is. The limit is not kept apart: it is the n of
// the live holdings (all the same, checked at admission), so it goes with
// the last of them, even with a crashed holder's session.

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
	dig  string
}

// permitKey is one of the store's own semaphore holdings: its etcd key and
// CreateRevision.
type permitKey struct {
	k      string
	create int64
}

func semValue(n, k int, dig string) string {
	return semValuePrefix + strconv.Itoa(n) + " " + strconv.Itoa(k) + " " + dig
}

func parseSem(kv *mvccpb.KeyValue) (semHolding, error) {
	f := strings.Fields(strings.TrimPrefix(string(kv.Value), semValuePrefix))
	if !strings.HasPrefix(string(kv.Value), semValuePrefix) || len(f) != 3 {
		return semHolding{}, fmt.Errorf("%w: etcdstore: key %q holds %q, not a semaphore holding", driver.ErrRefused, kv.Key, kv.Value)
	}
	n, err1 := strconv.Atoi(f[0])
	k, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || n < 1 || k < 1 || k > n {
		return semHolding{}, fmt.Errorf("%w: etcdstore: key %q holds %q, not a semaphore holding", driver.ErrRefused, kv.Key, kv.Value)
	}
	return semHolding{kv: kv, n: n, k: k, dig: f[2]}, nil
}

// semState is a semaphore key as one read saw it.
type semState struct {
	own         *semHolding // the token's holding, if any
	limit, used int
	all         []semHolding
}

// readSem parses the holdings kvs; own is the one of the token with digest
// dig ("": none).
func readSem(kvs []*mvccpb.KeyValue, dig string) (semState, error) {
	var st semState
	for _, kv := range kvs {
		h, err := parseSem(kv)
		if err != nil {
			return semState{}, err
		}
		st.all = append(st.all, h)
		st.used += h.k
		st.limit = h.n // equal for all (admission checks it)
		if dig != "" && h.dig == dig {
			st.own = &st.all[len(st.all)-1]
		}
	}
	return st, nil
}

// semPfx returns the prefix of key's holdings.
func (s *Store) semPfx(key string) string { return s.famPfx(semTag, key) + "h/" }

// rememberPermit files the store's holding at k (created at rev) under
// the handle h (holdings prefix + token digest); forgetPermit drops it.
func (s *Store) rememberPermit(h, k string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.permits == nil {
		s.permits = map[string]permitKey{}
	}
	s.permits[h] = permitKey{k: k, create: rev}
}

func (s *Store) forgetPermit(h string) (permitKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pk, ok := s.permits[h]
	delete(s.permits, h)
	return pk, ok
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
	hpfx, dig := s.semPfx(key), digest(token)
	guard := fresh(hpfx)
	for range famAttempts {
		sess, err := s.session(ctx)
		if err != nil {
			return driver.PermitGrant{}, authRefused(err)
		}
		name := s.newName(sess, hpfx)
		put, rev, kvs, err := s.putIf(ctx, sess, []clientv3.Cmp{guard}, name, semValue(n, k, dig), hpfx)
		if !put && err == nil || errors.Is(err, errSessionGone) {
			s.freeName(name) // not put (an unknown outcome keeps it reserved)
		}
		if errors.Is(err, errSessionGone) {
			continue
		}
		if err != nil {
			return driver.PermitGrant{}, fmt.Errorf("etcdstore: acquire permits of %q: %w", key, err)
		}
		st, err := readSem(kvs, dig)
		if err != nil {
			return driver.PermitGrant{}, err
		}
		if put {
			s.rememberPermit(hpfx+dig, name, rev)
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
		guard = s.admitGuard(hpfx, rev)
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
	resp, err := s.cli.Get(ctx, s.semPfx(key), clientv3.WithPrefix())
	if err != nil {
		return driver.PermitGrant{}, fmt.Errorf("etcdstore: extend permits of %q: %w", key, err)
	}
	st, err := readSem(resp.Kvs, digest(token))
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

// ReleasePermits implements driver.Semaphore: one transaction deleting
// the token's holding, guarded by its CreateRevision, for a holding this
// Store took; a read of the key's holdings first for one it did not (any
// Store can release by token). If there is none it returns
// driver.NotHeld(false). A ctx that has already ended returns its error at
// once, sending nothing: the holding lives on with the session, as a Mutex
// holding does.
func (s *Store) ReleasePermits(ctx context.Context, key, token string) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("etcdstore: release permits of %q: nothing sent, the permits are still held: %w", key, err)
	}
	hpfx, dig := s.semPfx(key), digest(token)
	pk, known := s.forgetPermit(hpfx + dig)
	for range maxAttempts {
		if !known {
			resp, err := s.cli.Get(ctx, hpfx, clientv3.WithPrefix())
			if err != nil {
				return fmt.Errorf("etcdstore: release permits of %q: %w", key, err)
			}
			st, err := readSem(resp.Kvs, dig)
			if err != nil {
				return err
			}
			if st.own == nil {
				return driver.NotHeld(false)
			}
			pk = permitKey{k: string(st.own.kv.Key), create: st.own.kv.CreateRevision}
		}
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(pk.k), "=", pk.create)).Then(clientv3.OpDelete(pk.k)).Commit()
		if err != nil {
			return fmt.Errorf("etcdstore: release permits of %q: %w", key, err)
		}
		if resp.Succeeded {
			s.freeName(pk.k)
			return nil
		}
		known = false // gone or not ours any more: read again
	}
	return fmt.Errorf("etcdstore: release permits of %q: the holdings kept changing", key)
}

// SubscribePermits implements driver.PermitNotifier with a watch of key's
// holdings: every deletion of one (a release, or a session ending) sends a
// value. It returns once the watch is registered on the server.
func (s *Store) SubscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := driver.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	return s.subscribe(ctx, s.semPfx(key), func(e *clientv3.Event) bool { return e.Type == mvccpb.DELETE })
}

// InspectPermits implements driver.PermitInspector: one read of key's
// holdings, then the remaining time of each session holding them. Token is
// empty: etcd keeps a digest of it only.
func (s *Store) InspectPermits(ctx context.Context, key string) (driver.PermitInfo, error) {
	if err := driver.ValidateKey(key); err != nil {
		return driver.PermitInfo{}, err
	}
	resp, err := s.cli.Get(ctx, s.semPfx(key), clientv3.WithPrefix())
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
