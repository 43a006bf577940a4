package etcdstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// children returns the keys directly under pfx (a lock's own keys, not those
// of a lock whose name extends it), oldest first.
func children(kvs []*mvccpb.KeyValue, pfx string) []*mvccpb.KeyValue {
	var out []*mvccpb.KeyValue
	for _, kv := range kvs {
		if rest := strings.TrimPrefix(string(kv.Key), pfx); rest != "" && !strings.Contains(rest, "/") {
			out = append(out, kv)
		}
	}
	return out
}

// KeepsMeta implements driver.MetaKeeper: the holder metadata is kept in
// the holding key's value, after a newline, from the put that queues or
// acquires it; re-entries, partial releases and transfers rewrite the value
// with it. Inspect and List read it back for any holder, in any process.
// A process running a version of this package from before holder metadata
// still finds such a holding held (its Acquire is contended), but its
// Inspect refuses the value as not a lock's (driver.ErrRefused): upgrade
// the processes that share a Prefix before passing metadata.
func (s *Store) KeepsMeta() bool { return true }

// Inspect implements driver.Inspector. The holder is the oldest key under
// the lock's prefix; Token is known only for this Store's own holdings
// (other processes' keys hold a digest at most), Remaining is the holder's
// session TTL as the server reports it, and Fence is 0 when the key is free
// (etcd keeps nothing of a released lock). A failed read returns etcd's
// error, wrapped, matching no sentinel.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	pfx := s.pfx(key)
	resp, err := s.cli.Get(ctx, pfx, clientv3.WithFirstCreate()...)
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdstore: inspect %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return driver.Info{Remaining: -1}, nil
	}
	return s.info(ctx, resp.Kvs[0])
}

// info describes the holding of kv, the holder's key.
func (s *Store) info(ctx context.Context, kv *mvccpb.KeyValue) (driver.Info, error) {
	v, err := parseValue(kv.Value)
	if err != nil {
		return driver.Info{}, err
	}
	in := s.known(kv, v)
	if kv.Lease != 0 {
		if ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && ttl.TTL >= 0 {
			in.Remaining = time.Duration(ttl.TTL) * time.Second
		}
	}
	return in, nil
}

// List implements driver.Lister: one range read of every key under the
// store's prefix + prefix, grouped by lock name. Keys that are not a
// lock's (no lease, or a value that is not dlock's nor empty) are skipped;
// Remaining is reported as unknown (-1) to keep List to one read. A failed
// read returns etcd's error, wrapped, before fn is called.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	resp, err := s.cli.Get(ctx, s.prefix+prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return fmt.Errorf("etcdstore: list: %w", err)
	}
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		full := strings.TrimPrefix(string(kv.Key), s.prefix)
		i := strings.LastIndexByte(full, '/')
		if i <= 0 || kv.Lease == 0 || seen[full[:i]] {
			continue
		}
		v, err := parseValue(kv.Value)
		if err != nil {
			continue
		}
		name := full[:i]
		seen[name] = true
		if !fn(name, s.known(kv, v)) {
			return nil
		}
	}
	return nil
}

// known describes the holding at kv, whose value is v, with what this Store
// knows of it if it is one of its own: the token and the fence.
func (s *Store) known(kv *mvccpb.KeyValue, v lockValue) driver.Info {
	in := driver.Info{Held: true, Holds: v.holds, Fence: uint64(fenceOf(kv)), Remaining: -1, Foreign: v.digest == "", Meta: v.meta}
	if v.digest == "" || kv.Lease == 0 {
		return in
	}
	dir := string(kv.Key)[:strings.LastIndexByte(string(kv.Key), '/')+1]
	name := dir + strconv.FormatInt(kv.Lease, 16) + "_" + v.digest[:24]
	if h, ok := s.lookup(name); ok && h.k == string(kv.Key) && h.create == kv.CreateRevision {
		in.Token, in.Fence = h.token, uint64(max(h.fence, fenceOf(kv)))
	}
	return in
}

// Waiters implements driver.WaiterCounter: the keys queued under the lock's
// prefix behind the holder (dlock's and etcdctl's), from one read; a failed
// read returns 0 and etcd's error, wrapped, matching no sentinel.
func (s *Store) Waiters(ctx context.Context, key string) (int, error) {
	pfx := s.pfx(key)
	resp, err := s.cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("etcdstore: waiters %q: %w", key, err)
	}
	return max(len(children(resp.Kvs, pfx))-1, 0), nil
}

// OwnerCmp returns a comparison that holds while the holding of key with
// fence is this Store's and its key is unchanged: put it in the If of your
// own etcd transaction (as concurrency.Mutex.IsOwner) so that etcd rejects
// the write of a holder that has lost the lock, however late it arrives.
// It compares the key's ModRevision, so anything that rewrites the key ends
// it: a release, a transfer to the next local waiter (which keeps the key
// but not its holder), and also a re-entry or a partial release by the
// same holder (call OwnerCmp again after those). It returns an error
// matching driver.ErrNotHeld if the store holds no such holding (released,
// lost, handed on, or another store's).
func (s *Store) OwnerCmp(key string, fence uint64) (clientv3.Cmp, error) {
	pfx := s.pfx(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.held {
		if uint64(h.fence) == fence && strings.HasPrefix(h.k, pfx) && !strings.Contains(h.k[len(pfx):], "/") {
			return clientv3.Compare(clientv3.ModRevision(h.k), "=", h.mod), nil
		}
	}
	return clientv3.Cmp{}, fmt.Errorf("%w: etcdstore: no holding of %q with fence %d in this store", driver.ErrNotHeld, key, fence)
}
