package etcdstore

import (
	"context"
	"fmt"
	"strings"

	"example.com/dlock/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Apply implements driver.Atomic: the step's lock part (Acquire, Transfer
// or Release, as those methods) and its resource read and write in one etcd
// transaction. A holder that lost the lock writes nothing; a contended,
// not-held or refused step reads and writes nothing and returns its lock
// part's error (except Transfer through another Store's session found
// ended after the rewrite: driver.NotHeld with the write made). A resource
// inside the lock prefix, a Write with Acquire, an empty Write.Resource or
// an unknown Action match driver.ErrInvalid, changing nothing. An error
// matching no sentinel leaves the outcome unknown.
func (s *Store) Apply(ctx context.Context, step driver.Step) (driver.Grant, driver.Value, error) {
	// The write is a put of the resource key (verbatim, no prefix, no
	// lease: it stays after the lock ends) in the transaction that deletes
	// or rewrites the holder's key, guarded by the same compare as Release
	// and Transfer (the holding key's ModRevision). The read is a get in the
	// same transaction, after the write: for Acquire, the value right after
	// the grant. A resource inside Options.Prefix or the lock's own prefix
	// Prefix+Key+"/" would be taken for a lock's key, hence refused.
	if err := s.checkStep(step); err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	if step.Action == driver.Acquire {
		g, v, err := s.acquire(ctx, step.Key, step.Token, step.Read)
		return g, v, authRefused(err)
	}
	read, v := step.Read, driver.Value{}
	if step.Write != nil && read == step.Write.Resource {
		read, v = "", driver.Value{Data: step.Write.Value, Found: true} // read what we write
	}
	var g driver.Grant
	var got driver.Value
	var err error
	if step.Action == driver.Transfer {
		g, got, err = s.transfer(ctx, step.Key, step.Token, step.To, step.Write, read)
	} else { // driver.Release, checked
		got, err = s.release(ctx, step.Key, step.Token, step.Write, read)
	}
	if err != nil {
		return driver.Grant{}, driver.Value{}, authRefused(err)
	}
	if read != "" {
		v = got
	}
	return g, v, nil
}

// checkStep refuses what Apply cannot do, before any I/O.
func (s *Store) checkStep(step driver.Step) error {
	switch step.Action {
	case driver.Acquire:
		if step.Write != nil {
			return fmt.Errorf("%w: etcdstore: an Acquire step cannot write", driver.ErrInvalid)
		}
	case driver.Transfer, driver.Release:
	default:
		return fmt.Errorf("%w: etcdstore: unknown step action %d", driver.ErrInvalid, step.Action)
	}
	if step.Write != nil {
		if step.Write.Resource == "" {
			return fmt.Errorf("%w: etcdstore: a Write needs a resource key", driver.ErrInvalid)
		}
		if err := s.checkResource(step.Key, step.Write.Resource); err != nil {
			return err
		}
	}
	if step.Read != "" {
		return s.checkResource(step.Key, step.Read)
	}
	return nil
}

// checkResource refuses a resource key inside the store's lock prefix.
func (s *Store) checkResource(key, res string) error {
	if (s.prefix != "" && strings.HasPrefix(res, s.prefix)) || strings.HasPrefix(res, s.pfx(key)) {
		return fmt.Errorf("%w: etcdstore: resource key %q is inside the lock prefix %q", driver.ErrInvalid, res, s.prefix+key+"/")
	}
	return nil
}

// ownerGuard is the compare every change of holding h makes: h's key is
// unchanged since the store last saw it (as OwnerCmp).
func ownerGuard(h holding) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(h.k), "=", h.mod)
}

// releaseOps are the operations of a release of one hold of h (token digest
// dig): a delete of the last hold, else a put of the lowered count; then
// w's put and read's get, if set. They are sent under ownerGuard(h).
func releaseOps(h holding, dig string, w *driver.Write, read string) []clientv3.Op {
	op := clientv3.OpDelete(h.k)
	if h.holds > 1 {
		op = clientv3.OpPut(h.k, valueMeta(h.holds-1, dig, h.vfence, h.meta), clientv3.WithLease(h.lease))
	}
	return withRead(read, withWrite(w, op)...)
}

// transferOps are the operations of a transfer of h to the token with
// digest digTo and fence: the rewrite of h's key, then w's put and read's
// get, if set. They are sent under ownerGuard(h).
func transferOps(h holding, digTo string, fence int64, w *driver.Write, read string) []clientv3.Op {
	return withRead(read, withWrite(w, clientv3.OpPut(h.k, valueMeta(1, digTo, fence, h.meta), clientv3.WithLease(h.lease)))...)
}

// withWrite appends w's put to ops, if w is not nil.
func withWrite(w *driver.Write, ops ...clientv3.Op) []clientv3.Op {
	if w == nil {
		return ops
	}
	return append(ops, clientv3.OpPut(w.Resource, w.Value))
}

// withRead appends a get of the resource key read to ops, if read is not
// empty: it is then the last operation, whose response readValue decodes.
func withRead(read string, ops ...clientv3.Op) []clientv3.Op {
	if read == "" {
		return ops
	}
	return append(ops, clientv3.OpGet(read))
}

// readValue is the value read by the last response of rs, the get withRead
// appended; the zero Value if read is empty.
func readValue(read string, rs []*pb.ResponseOp) driver.Value {
	if read == "" || len(rs) == 0 {
		return driver.Value{}
	}
	kvs := rs[len(rs)-1].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return driver.Value{}
	}
	return driver.Value{Data: string(kvs[0].Value), Found: true}
}
