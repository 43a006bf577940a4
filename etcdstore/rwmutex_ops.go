package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ExtendRW implements driver.RWMutex: one keepalive of the session (shared
// with concurrent renewals: it renews every holding of the store) and one
// read confirming the token's holding. ttl is ignored, as for AcquireRead.
// If token holds nothing of key it returns driver.NotHeld(false); an error
// matching no sentinel leaves the holding as alive as the session's certain
// life.
func (s *Store) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	start, k := time.Now(), s.rwKeys(key, token)
	sess, err := s.renewed(ctx)
	if err != nil {
		return driver.RWGrant{}, err
	}
	resp, err := s.cli.Get(ctx, k.pfx, clientv3.WithPrefix())
	if err != nil {
		return driver.RWGrant{}, fmt.Errorf("etcdstore: extend %q: %w", key, err)
	}
	st := readRW(resp.Kvs, k)
	if st.own == nil {
		return driver.RWGrant{}, driver.NotHeld(false)
	}
	g, err := s.rwReentry(ctx, sess, st, start)
	if errors.Is(err, errChanged) {
		return driver.RWGrant{}, driver.NotHeld(false)
	}
	return g, err
}

// ReleaseRW implements driver.RWMutex: one transaction deleting the
// token's holding, read or write (from any Store: the keys are named after
// the token); its writer-waiting mark, if any, is left to its lease. If
// there is no holding it returns driver.NotHeld(false). A ctx that has
// already ended returns its error at once, sending nothing: the holding
// lives on with the session, as a Mutex holding does.
func (s *Store) ReleaseRW(ctx context.Context, key, token string) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("etcdstore: release %q: nothing sent, the lock is still held: %w", key, err)
	}
	k := s.rwKeys(key, token)
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpDelete(k.read), clientv3.OpDelete(k.write)).Commit()
	if err != nil {
		return fmt.Errorf("etcdstore: release %q: %w", key, err)
	}
	if resp.Responses[0].GetResponseDeleteRange().Deleted+resp.Responses[1].GetResponseDeleteRange().Deleted == 0 {
		return driver.NotHeld(false)
	}
	return nil
}

// SubscribeRW implements driver.RWNotifier with a watch of key's
// holdings: every deletion of one (a release, a downgrade, whose write key
// is deleted, or a session ending) sends a value; marks send nothing. It
// returns once the watch is registered on the server.
func (s *Store) SubscribeRW(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := driver.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	pfx := s.famPfx(rwTag, key)
	return s.subscribe(ctx, pfx, func(e *clientv3.Event) bool {
		rest := strings.TrimPrefix(string(e.Kv.Key), pfx)
		return e.Type == mvccpb.DELETE && (strings.HasPrefix(rest, "r/") || strings.HasPrefix(rest, "x/"))
	})
}

// InspectRW implements driver.RWInspector: one read of key's keys, then
// the remaining time of each lease holding them (the sessions, and the
// marks' own). Token is empty: etcd keeps a digest of it only.
func (s *Store) InspectRW(ctx context.Context, key string) (driver.RWInfo, error) {
	if err := driver.ValidateKey(key); err != nil {
		return driver.RWInfo{}, err
	}
	k := s.rwKeys(key, "")
	resp, err := s.cli.Get(ctx, k.pfx, clientv3.WithPrefix())
	if err != nil {
		return driver.RWInfo{}, fmt.Errorf("etcdstore: inspect %q: %w", key, err)
	}
	ttls, err := s.leaseTTLs(ctx, resp.Kvs)
	if err != nil {
		return driver.RWInfo{}, fmt.Errorf("etcdstore: inspect %q: %w", key, err)
	}
	st := readRW(resp.Kvs, k)
	var info driver.RWInfo
	add := func(kv *mvccpb.KeyValue, mode driver.RWMode) {
		if left, ok := ttls[kv.Lease]; ok {
			info.Mode = mode
			info.Holders = append(info.Holders, driver.RWHolder{Mode: mode, Fence: rwFence(kv), Remaining: left})
		}
	}
	for _, kv := range st.readers {
		add(kv, driver.RWRead)
	}
	if st.writer != nil {
		add(st.writer, driver.RWWrite)
	}
	for _, kv := range st.marks {
		info.WriterWaiting = max(info.WriterWaiting, ttls[kv.Lease])
	}
	return info, nil
}
