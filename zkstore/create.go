package zkstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// openACL is what the store creates nodes with by default: open, as
// Curator's default (Options.ACL).
var openACL = zk.WorldACL(zk.PermAll)

// createAttempts bounds the creates of one call (a missing parent, a lost
// connection, an expired session each cost one).
const createAttempts = 4

// created is a lock node the store created (or adopted): its name, full
// path, and either its owner session (sid, when create could tell it: the
// conn kept one session around the create) or its stat (read by
// statCreated: protected-mode recovery, or a create across a session
// change). A fresh node's data version is 0 and its czxid is not needed
// (see grantFence), so the common path reads nothing after the create.
type created struct {
	name, path string
	sid        int64
	stat       *zk.Stat
}

// owner is the node's ephemeral owner (0 if unknown: stat it).
func (c created) owner() int64 {
	if c.stat != nil {
		return c.stat.EphemeralOwner
	}
	return c.sid
}

// czxid is the node's czxid, 0 when it was not read.
func (c created) czxid() int64 {
	if c.stat != nil {
		return c.stat.Czxid
	}
	return 0
}

// version is the node's data version: 0 for a node just created.
func (c created) version() int32 {
	if c.stat != nil {
		return c.stat.Version
	}
	return 0
}

// create makes our EPHEMERAL_SEQUENTIAL node under lock path lp with data,
// Curator's protected way: the name carries a new UUID per attempt; a
// missing parent is created (as container nodes) and the create retried;
// after a lost connection the children are listed and a node with the
// attempt's UUID is adopted if the conn's session still owns it, else
// deleted. A node whose create may have happened but could not be found
// (the listing failed too, or ctx ended) is recorded as an orphan, deleted
// by the next call on lp. The node's owner session is the conn's when the
// conn had that same session just before and just after the create, which
// the create's reply came in between (session ids are never reused); if
// not, created.sid is 0 and the caller stats the node.
func (s *Store) create(ctx context.Context, key, lp string, data []byte) (created, error) {
	return s.createNode(ctx, key, lp, nodePrefix, zk.FlagEphemeralSequential, data)
}

// createNode is create with the node's name (the UUID's, as name makes
// it) and flags given: the read-write lock's nodes (rwNodeName) and the
// plain ephemeral node of a downgrade use it.
func (s *Store) createNode(ctx context.Context, key, lp string, name func(uuid string) string, flags int32, data []byte) (created, error) {
	var last error
	for range createAttempts {
		uuid := newUUID()
		var p string
		var sid int64
		err := s.call(ctx, true, func() error {
			before := s.conn.SessionID()
			var e error
			p, e = s.conn.Create(lp+"/"+name(uuid), data, flags, s.acl)
			if after := s.conn.SessionID(); e == nil && before == after {
				sid = before // 0 (unknown) if there was no session
			}
			return e
		}, func() { _ = s.conn.Delete(p, -1) }) // created after the caller left
		switch {
		case err == nil:
			name := p[strings.LastIndexByte(p, '/')+1:]
			return created{name: name, path: p, sid: sid}, nil // stat read by the caller if sid is 0
		case errors.Is(err, zk.ErrNoNode):
			if err := s.createParents(ctx, key, lp); err != nil {
				return created{}, err
			}
		case errors.Is(err, zk.ErrSessionExpired):
			// the node, if made, went with the session
		case errors.Is(err, zk.ErrConnectionClosed) && s.unprotected:
			// the naive retry of the tests' negative control
		case errors.Is(err, zk.ErrConnectionClosed):
			c, found, err := s.recover(ctx, key, lp, uuid)
			if err != nil || found {
				return c, err
			}
		default:
			if !replied(err) {
				s.addOrphan(lp, uuid)
			}
			return created{}, wrapErr("create lock node for", key, err)
		}
		last = err
	}
	return created{}, wrapErr("create lock node for", key, fmt.Errorf("%d attempts: %w", createAttempts, last))
}

// statCreated reads the stat of the node we just created (for its owner
// session, when create could not tell it, and its version).
func (s *Store) statCreated(ctx context.Context, key, p string) (created, error) {
	var st *zk.Stat
	var ok bool
	err := s.read(ctx, func() error {
		var e error
		ok, st, e = s.conn.Exists(p)
		return e
	})
	name := p[strings.LastIndexByte(p, '/')+1:]
	if err != nil {
		s.addOrphan(p[:len(p)-len(name)-1], uuidOf(name))
		return created{}, wrapErr("read lock node for", key, err)
	}
	if !ok {
		return created{}, wrapErr("read lock node for", key, errors.New("our node vanished: the session expired"))
	}
	return created{name: name, path: p, stat: st}, nil
}

// recover is protected mode after a create lost its connection: find the
// node with uuid among lp's children; adopt it if the conn's session owns
// it (found true), else delete it (it belongs to a session that expired
// meanwhile) and report not found, so that the caller retries.
func (s *Store) recover(ctx context.Context, key, lp, uuid string) (created, bool, error) {
	var kids []string
	err := s.read(ctx, func() error {
		var e error
		kids, _, e = s.conn.Children(lp)
		return e
	})
	if errors.Is(err, zk.ErrNoNode) {
		return created{}, false, nil
	}
	if err != nil {
		s.addOrphan(lp, uuid)
		return created{}, false, wrapErr("find lock node after a lost connection for", key, err)
	}
	for _, k := range kids {
		if !hasUUID(k, uuid) {
			continue
		}
		c, err := s.statCreated(ctx, key, lp+"/"+k)
		if err != nil {
			return created{}, false, err
		}
		if c.stat.EphemeralOwner == s.conn.SessionID() {
			return c, true, nil
		}
		if err := s.deleteNode(ctx, c.path, c.stat.Version); err != nil {
			s.addOrphan(lp, uuid)
			return created{}, false, wrapErr("delete lock node of an old session for", key, err)
		}
	}
	return created{}, false, nil
}

// createParents creates lp and its missing ancestors as container nodes
// (as Curator's creatingParentContainersIfNeeded), ignoring existing ones.
func (s *Store) createParents(ctx context.Context, key, lp string) error {
	for i := 1; i <= len(lp); i++ {
		if i < len(lp) && lp[i] != '/' {
			continue
		}
		dir := lp[:i]
		err := s.write(ctx, func() error {
			_, e := s.conn.CreateContainer(dir, nil, zk.FlagContainer, s.acl)
			return e
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return wrapErr("create lock path for", key, err)
		}
	}
	return nil
}

// deleteNode deletes path if its data version is version; a missing node
// counts as deleted.
func (s *Store) deleteNode(ctx context.Context, path string, version int32) error {
	err := s.write(ctx, func() error { return s.conn.Delete(path, version) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// uuidOf returns the UUID in a protected node name ("" if none).
func uuidOf(name string) string {
	if !strings.HasPrefix(name, protectedPrefix) || len(name) < len(protectedPrefix)+uuidLen {
		return ""
	}
	return name[len(protectedPrefix) : len(protectedPrefix)+uuidLen]
}

func (s *Store) addOrphan(lp, uuid string) {
	if uuid == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orphan[lp] == nil {
		s.orphan[lp] = map[string]bool{}
	}
	s.orphan[lp][uuid] = true
}

// sweep deletes the orphans among lp's children kids (best effort: one
// that cannot be deleted now stays recorded; one not among kids was never
// created and is dropped) and returns kids without them.
func (s *Store) sweep(ctx context.Context, lp string, kids []string) []string {
	s.mu.Lock()
	set := s.orphan[lp]
	if len(set) == 0 {
		s.mu.Unlock()
		return kids
	}
	var todo []string
	out := kids[:0:0]
	seen := map[string]bool{}
	for _, k := range kids {
		if u := uuidOf(k); u != "" && set[u] {
			todo = append(todo, k)
			seen[u] = true
			continue
		}
		out = append(out, k)
	}
	for u := range set {
		if !seen[u] {
			delete(set, u)
		}
	}
	if len(set) == 0 {
		delete(s.orphan, lp)
	}
	s.mu.Unlock()
	for _, k := range todo {
		if err := s.deleteNode(ctx, lp+"/"+k, -1); err == nil {
			s.mu.Lock()
			delete(set, uuidOf(k))
			if len(set) == 0 {
				delete(s.orphan, lp)
			}
			s.mu.Unlock()
		}
	}
	return out
}
