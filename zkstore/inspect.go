package zkstore

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Inspect implements driver.Inspector: the lock path's first lock node
// (two reads). A dlock holder reports its hold count; its token only if it
// is this store's own holding. A node whose data is not dlock's (Curator's
// nodes carry the client's IP address) is reported held by a foreign
// client, with one hold. Remaining is how long this store's session is
// certain to last for its own holdings, else -1 (unknown). A free key
// reports fence 0. The fence is exact for this store's own holdings and for
// a node whose data carries its fence (after a transfer or a re-entry);
// for another store's holding granted by a listing whose pzxid is above
// the node's czxid (a waiter's grant), it is the czxid, smaller than the
// holder's fence: the package doc's Fence section says why. It returns an
// error matching ctx's if ctx ends first, one matching driver.ErrInvalid
// after Close, one
// matching driver.ErrRefused when the session may not read the nodes (ACL,
// authentication), and otherwise ZooKeeper's error, matching no sentinel.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := s.checkKey(key); err != nil {
		return driver.Info{Remaining: -1}, err
	}
	lp := s.lockPath(key)
	name, data, st, err := s.firstNode(ctx, key, lp)
	if err != nil || st == nil {
		return driver.Info{Remaining: -1}, err
	}
	return s.info(lp+"/"+name, data, st), nil
}

// info describes the holder node at path.
func (s *Store) info(path string, data []byte, st *zk.Stat) driver.Info {
	var dig string
	info := driver.Info{Held: true, Holds: 1, Remaining: -1, Fence: uint64(st.Czxid)}
	d, ok := parseData(data)
	if !ok {
		info.Foreign, info.Meta = true, foreignMeta(data)
		return info
	}
	info.Holds, info.Fence, dig, info.Meta = d.holds, uint64(fenceOf(d, st.Czxid, st.Mzxid)), d.dig, d.meta
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.held {
		if h.path == path && digest(h.token) == dig && h.sid == s.sess.id {
			info.Token, info.Fence = h.token, uint64(h.fence)
			info.Remaining = max(time.Until(s.sess.certain), 0)
		}
	}
	return info
}

// List implements driver.Lister: it walks the tree under the root and
// reports every lock path that has a lock node, decoded back to its lock
// name, whose name starts with prefix. Paths that are not lock paths (no
// lock node among their children) are skipped. It reads each directory
// once and each holder's data once. Errors are as for Inspect; fn may have
// been called for some keys before one.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	strip := func(key string, info driver.Info) bool { return fn(strings.TrimPrefix(key, s.prefix), info) }
	_, err := s.walk(ctx, s.root, "", s.prefix+prefix, strip)
	return err
}

// walk lists dir (whose lock name is rel) and its subdirectories; false
// when fn asked to stop.
func (s *Store) walk(ctx context.Context, dir, rel, prefix string, fn func(string, driver.Info) bool) (bool, error) {
	var kids []string
	err := s.read(ctx, func() error {
		var e error
		kids, _, e = s.conn.Children(dir)
		return e
	})
	if errors.Is(err, zk.ErrNoNode) {
		return true, nil
	}
	if err != nil {
		return false, wrapErr("list", rel, err)
	}
	if nodes := s.participants(kids); len(nodes) > 0 && rel != "" {
		if key, ok := decodeKey(rel); ok && strings.HasPrefix(key, prefix) {
			if more, err := s.report(ctx, dir, key, nodes[0], fn); !more || err != nil {
				return false, err
			}
		}
	}
	for _, k := range kids {
		if s.isParticipant(k) {
			continue
		}
		sub := k
		if rel != "" {
			sub = rel + "/" + k
		}
		if key, ok := decodeKey(sub); !ok || !couldMatch(key, prefix) {
			continue
		}
		if more, err := s.walk(ctx, dir+"/"+k, sub, prefix, fn); !more || err != nil {
			return more, err
		}
	}
	return true, nil
}

// couldMatch reports whether key or a name under it can start with prefix.
func couldMatch(key, prefix string) bool {
	return strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key+"/")
}

// report reads the holder node and calls fn; a holder released meanwhile
// is skipped.
func (s *Store) report(ctx context.Context, dir, key, first string, fn func(string, driver.Info) bool) (bool, error) {
	data, st, err := s.get(ctx, dir+"/"+first)
	if errors.Is(err, zk.ErrNoNode) {
		return true, nil
	}
	if err != nil {
		return false, wrapErr("read", key, err)
	}
	return fn(key, s.info(dir+"/"+first, data, st)), nil
}

// Waiters implements driver.WaiterCounter: the lock nodes after the first
// (dlock's and Curator's waiters alike; a contended Acquire counts while
// its node briefly exists). Errors are as for Inspect.
func (s *Store) Waiters(ctx context.Context, key string) (int, error) {
	if err := s.checkKey(key); err != nil {
		return 0, err
	}
	nodes, err := s.children(ctx, key, s.lockPath(key))
	if err != nil {
		return 0, err
	}
	return max(len(nodes)-1, 0), nil
}

// KeepsMeta implements driver.MetaKeeper: the holder metadata is kept in the
// lock node's data, after a newline, from the create that queues or
// acquires it; re-entries, partial releases and transfers rewrite the data
// with it. Inspect and List read it back for any holder; for a node whose
// data is not dlock's they report that data as Info.Meta (Curator writes
// the client's IP address). A process running a version of this package
// from before holder metadata sees a holding with metadata as a foreign
// (non-dlock) holder, which excludes it as any other node does.
func (s *Store) KeepsMeta() bool { return true }

// foreignMeta is the data of a node that is not dlock's as Info.Meta shows
// it: at most driver.MaxMetaLen bytes of text, each control character or
// invalid byte replaced by '?'.
func foreignMeta(data []byte) string {
	m := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return '?'
		}
		return r
	}, string(data))
	for len(m) > driver.MaxMetaLen {
		_, size := utf8.DecodeLastRuneInString(m)
		m = m[:len(m)-size]
	}
	return m
}
