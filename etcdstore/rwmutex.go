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

// An RWMutex key K is three sets of keys under famPfx(rwTag, K), each
// named after a token's digest: "r/" the read holdings and "x/" the write
// holding, on the session lease of the Store that took them, and "w/" the
// writer-waiting marks, each on a lease of its own of WriterWaitTTL. A
// holding's value is "dlock/rw1 read" or "dlock/rw1 write", with " <fence>"
// after it for a read holding made by a downgrade (which keeps the write
// holding's fence); otherwise the fence is the key's CreateRevision.
//
// Admission is one transaction whose guards say it all: a reader gets in
// if no "x/" key, no "w/" key and no key of its own exist; a writer if no
// "r/" and no "x/" key exist. No wait is "then own": every holding is a
// put on a live lease under those guards at the moment it is granted, so a
// waiter whose session was revoked gets nothing from it (etcd #16221).

const rwValuePrefix = "dlock/rw1 "

var (
	_ driver.RWMutex     = (*Store)(nil)
	_ driver.RWNotifier  = (*Store)(nil)
	_ driver.RWInspector = (*Store)(nil)
)

// rwKeys are the etcd keys of one token on one RWMutex key.
type rwKeys struct {
	pfx, read, write, mark string
}

func (s *Store) rwKeys(key, token string) rwKeys {
	p, d := s.famPfx(rwTag, key), digest(token)
	return rwKeys{pfx: p, read: p + "r/" + d, write: p + "x/" + d, mark: p + "w/" + d}
}

func rwValue(mode driver.RWMode, fence int64) string {
	if fence > 0 {
		return rwValuePrefix + mode.String() + " " + strconv.FormatInt(fence, 10)
	}
	return rwValuePrefix + mode.String()
}

// rwState is an RWMutex key as one read saw it.
type rwState struct {
	own     *mvccpb.KeyValue // the token's holding, if any
	ownMode driver.RWMode
	writer  *mvccpb.KeyValue
	readers []*mvccpb.KeyValue
	marks   []*mvccpb.KeyValue
}

func readRW(kvs []*mvccpb.KeyValue, k rwKeys) rwState {
	var st rwState
	for _, kv := range kvs {
		name := string(kv.Key)
		switch rest := strings.TrimPrefix(name, k.pfx); {
		case strings.HasPrefix(rest, "r/"):
			st.readers = append(st.readers, kv)
			if name == k.read {
				st.own, st.ownMode = kv, driver.RWRead
			}
		case strings.HasPrefix(rest, "x/"):
			st.writer = kv
			if name == k.write {
				st.own, st.ownMode = kv, driver.RWWrite
			}
		case strings.HasPrefix(rest, "w/"):
			st.marks = append(st.marks, kv)
		}
	}
	return st
}

// rwFence is the fence of the holding at kv: the one in its value (a
// downgraded holding), else its CreateRevision.
func rwFence(kv *mvccpb.KeyValue) uint64 {
	f := strings.Fields(strings.TrimPrefix(string(kv.Value), rwValuePrefix))
	if len(f) == 2 {
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil && n > 0 {
			return uint64(n)
		}
	}
	return uint64(kv.CreateRevision)
}

// taken is the refusal of a call that found st.
func (st rwState) taken() *driver.RWTakenError {
	te := &driver.RWTakenError{Readers: len(st.readers), WriterWaiting: len(st.marks) > 0, Remaining: -1}
	switch {
	case st.writer != nil:
		te.Held, te.Readers = driver.RWWrite, 0
	case len(st.readers) > 0:
		te.Held = driver.RWRead
	}
	return te
}

func absent(k string) clientv3.Cmp { return clientv3.Compare(clientv3.CreateRevision(k), "=", 0) }

// AcquireRead implements driver.RWMutex: one transaction that puts the
// token's read holding if no writer holds key, no writer-waiting mark is
// live and the token holds nothing, else reads the key; a reader's call is
// then a re-entry, the writer's a downgrade (one more transaction). ttl is
// ignored: the holding lasts as long as the session (RWGrant.TTL is its
// certain life). A refused call returns a *driver.RWTakenError with
// Remaining -1 and changes nothing.
func (s *Store) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	start, k := time.Now(), s.rwKeys(key, token)
	guards := []clientv3.Cmp{absent(k.read), absent(k.write), fresh(k.pfx + "x/"), fresh(k.pfx + "w/")}
	if s.unguarded { // a test's negative control: a reader that ignores the writer
		guards = []clientv3.Cmp{absent(k.read), absent(k.write)}
	}
	for range famAttempts {
		sess, err := s.session(ctx)
		if err != nil {
			return driver.RWGrant{}, authRefused(err)
		}
		put, rev, kvs, err := s.putIf(ctx, sess, guards, k.read, rwValue(driver.RWRead, 0), k.pfx)
		if errors.Is(err, errSessionGone) {
			continue
		}
		if err != nil {
			return driver.RWGrant{}, fmt.Errorf("etcdstore: acquire read of %q: %w", key, err)
		}
		st := readRW(kvs, k)
		if put {
			return driver.RWGrant{Mode: driver.RWRead, Fence: uint64(rev), Readers: len(st.readers), TTL: s.certainTTL(sess, start)}, nil
		}
		var g driver.RWGrant
		switch {
		case st.own != nil && st.ownMode == driver.RWWrite:
			g, err = s.downgrade(ctx, sess, st.own, k, start)
		case st.own != nil:
			g, err = s.rwReentry(ctx, sess, st, start)
		default:
			return driver.RWGrant{}, st.taken()
		}
		if !errors.Is(err, errChanged) {
			return g, err
		}
	}
	return driver.RWGrant{}, fmt.Errorf("etcdstore: acquire read of %q: the key kept changing under %d attempts (nothing taken)", key, famAttempts)
}

// rwReentry answers a call by the token that holds st.own in its mode.
func (s *Store) rwReentry(ctx context.Context, sess *session, st rwState, start time.Time) (driver.RWGrant, error) {
	ttl, err := s.holdTTL(ctx, sess, clientv3.LeaseID(st.own.Lease), start)
	if err != nil {
		return driver.RWGrant{}, err
	}
	g := driver.RWGrant{Mode: st.ownMode, Fence: rwFence(st.own), TTL: ttl}
	if st.ownMode == driver.RWRead {
		g.Readers = len(st.readers)
	}
	return g, nil
}

// downgrade turns the write holding w into a read holding on the same
// lease with the same fence: one transaction that deletes w, if unchanged,
// and puts the read key. errChanged if w changed meanwhile.
func (s *Store) downgrade(ctx context.Context, sess *session, w *mvccpb.KeyValue, k rwKeys, start time.Time) (driver.RWGrant, error) {
	fence := rwFence(w)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k.write), "=", w.ModRevision)).
		Then(clientv3.OpDelete(k.write), clientv3.OpPut(k.read, rwValue(driver.RWRead, int64(fence)), clientv3.WithLease(clientv3.LeaseID(w.Lease)))).Commit()
	if err != nil {
		return driver.RWGrant{}, fmt.Errorf("etcdstore: downgrade: %w", err)
	}
	if !resp.Succeeded {
		return driver.RWGrant{}, errChanged
	}
	ttl, err := s.holdTTL(ctx, sess, clientv3.LeaseID(w.Lease), start)
	if err != nil {
		return driver.RWGrant{}, err
	}
	return driver.RWGrant{Mode: driver.RWRead, Fence: fence, Readers: 1, TTL: ttl}, nil
}

// AcquireWrite implements driver.RWMutex: one transaction that puts the
// token's write holding (and deletes its mark) if no holding of key
// exists, else reads the key. The writer's call is then a re-entry and a
// reader's is refused with driver.ErrUpgrade; otherwise the call leaves
// the token's writer-waiting mark (a lease of WriterWaitTTL granted for it,
// and a put: two more round trips) and returns a *driver.RWTakenError with
// Remaining -1. ttl is ignored, as for AcquireRead.
func (s *Store) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	start, k := time.Now(), s.rwKeys(key, token)
	guards := []clientv3.Cmp{fresh(k.pfx + "r/"), fresh(k.pfx + "x/")}
	for range famAttempts {
		sess, err := s.session(ctx)
		if err != nil {
			return driver.RWGrant{}, authRefused(err)
		}
		put, rev, kvs, err := s.putIf(ctx, sess, guards, k.write, rwValue(driver.RWWrite, 0), k.pfx, clientv3.OpDelete(k.mark))
		if errors.Is(err, errSessionGone) {
			continue
		}
		if err != nil {
			return driver.RWGrant{}, fmt.Errorf("etcdstore: acquire write of %q: %w", key, err)
		}
		if put {
			return driver.RWGrant{Mode: driver.RWWrite, Fence: uint64(rev), TTL: s.certainTTL(sess, start)}, nil
		}
		st := readRW(kvs, k)
		switch {
		case st.own != nil && st.ownMode == driver.RWRead:
			return driver.RWGrant{}, driver.ErrUpgrade
		case st.own != nil:
			g, err := s.rwReentry(ctx, sess, st, start)
			if errors.Is(err, errChanged) {
				continue
			}
			return g, err
		}
		if err := s.mark(ctx, k.mark); err != nil {
			return driver.RWGrant{}, fmt.Errorf("etcdstore: acquire write of %q: refused, and its writer-waiting mark failed: %w", key, err)
		}
		te := st.taken()
		te.WriterWaiting = true
		return driver.RWGrant{}, te
	}
	return driver.RWGrant{}, fmt.Errorf("etcdstore: acquire write of %q: the key kept changing under %d attempts (nothing taken)", key, famAttempts)
}

// mark puts the writer-waiting mark k on a new lease of WriterWaitTTL (the
// previous one, if any, moves to it: it lasts WriterWaitTTL from now).
func (s *Store) mark(ctx context.Context, k string) error {
	l, err := s.cli.Grant(ctx, int64(driver.WriterWaitTTL/time.Second))
	if err != nil {
		return authRefused(err)
	}
	_, err = s.cli.Put(ctx, k, rwValuePrefix+"mark", clientv3.WithLease(l.ID))
	return authRefused(err)
}
