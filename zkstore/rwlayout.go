package zkstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"example.com/dlock/driver"
)

// The node names of Curator's InterProcessReadWriteLock (protected, as
// its InterProcessMutex): <lock path>/_c_<UUID>-__READ__<%010d sequence>
// for a reader, _c_<UUID>-__WRIT__<sequence> for a writer, sorted by the
// part after the marker (SortingLockInternalsDriver.fixForSorting).
const (
	rwReadMarker  = "__READ__"
	rwWriteMarker = "__WRIT__"
)

// rwNodeName returns the name function of a sequential read-write lock
// node with marker (ZooKeeper appends the sequence).
func rwNodeName(marker string) func(uuid string) string {
	return func(uuid string) string { return protectedPrefix + uuid + "-" + marker }
}

// rwSortKey is Curator's ordering key for the read-write lock: the part
// after the last "__READ__", then of that the part after the last
// "__WRIT__" (the whole name for a child with neither).
func rwSortKey(child string) string {
	k := child
	for _, m := range []string{rwReadMarker, rwWriteMarker} {
		if i := strings.LastIndex(k, m); i >= 0 {
			k = k[i+len(m):]
		}
	}
	return k
}

// isRWNode reports whether child is named like a read-write lock node:
// a marker and then a sequence as %010d prints a signed 32-bit number.
func isRWNode(child string) bool {
	k := rwSortKey(child)
	if k == child {
		return false
	}
	n, err := strconv.ParseInt(k, 10, 32)
	return err == nil && fmt.Sprintf("%010d", n) == k
}

// rwIsWrite reports whether child is a writer's node, as Curator's reader
// tells it (the name contains "__WRIT__").
func rwIsWrite(child string) bool { return strings.Contains(child, rwWriteMarker) }

// rwSorted returns the read-write lock nodes among children in Curator's
// order. Equal keys (a downgrade's reader's node and the writer's node it
// replaces, while both exist) put the writer first, Curator the server's
// order: either way a later node sees a writer before it. Other children are
// not participants for this store (Curator counts them: it waits where
// this store would not, more exclusion, never less).
func rwSorted(children []string) []string {
	out := make([]string, 0, len(children))
	for _, c := range children {
		if isRWNode(c) {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		if c := strings.Compare(rwSortKey(a), rwSortKey(b)); c != 0 {
			return c
		}
		return compareBool(rwIsWrite(b), rwIsWrite(a)) // a writer before a downgrade's reader of its sequence
	})
	return out
}

// rwWrapped reports whether a node's sequence printed negative (see
// wrapped).
func rwWrapped(nodes []string) bool {
	return slices.ContainsFunc(nodes, func(c string) bool { return strings.HasPrefix(rwSortKey(c), "-") })
}

// rwHolds reports whether the node at index i of the sorted nodes holds
// the lock by Curator's rules: a writer if it is first, a reader if no
// writer's node is before it.
func rwHolds(nodes []string, i int) bool {
	if rwIsWrite(nodes[i]) {
		return i == 0
	}
	return !slices.ContainsFunc(nodes[:i], rwIsWrite)
}

// rwReaders counts the readers' nodes that hold (those before the first
// writer's node).
func rwReaders(nodes []string) int {
	n := 0
	for _, c := range nodes {
		if rwIsWrite(c) {
			break
		}
		n++
	}
	return n
}

// checkRWKey is driver.ValidateKey for key, then checkName's rule for the
// read-write lock's node names: no "/"-separated part after the first
// named like a read-write lock node (its container would be counted as a
// participant of the name before it).
func (s *Store) checkRWKey(key string) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	segs := strings.Split(encodeKey(s.prefix+key), "/")
	for _, seg := range segs[1:] {
		if isRWNode(seg) {
			return fmt.Errorf("%w: zkstore: read-write lock name %q: its part %q is named like a read-write lock node", driver.ErrInvalid, key, seg)
		}
	}
	return nil
}

// rwPath is the ZooKeeper path of read-write lock name key.
func (s *Store) rwPath(key string) string { return s.rwRoot + "/" + encodeKey(s.prefix+key) }

// The data of a read-write lock node this store creates:
// "dlock/rw <token digest> <state>", state one of rwWaiting (created, not
// yet granted: a queued writer, or a reader between its create and its
// grant), rwGranted (granted: the fence is the node's mzxid, the grant's
// setData) or a decimal fence (a downgrade's read node, which keeps the
// write holding's fence). Curator's nodes carry the client's IP address.
const (
	rwDataPrefix = "dlock/rw "
	rwWaiting    = "w"
	rwGranted    = "t"
)

func rwData(dig, state string) []byte { return []byte(rwDataPrefix + dig + " " + state) }

// parseRWData reads a read-write lock node's data; ok false for any other
// data.
func parseRWData(v []byte) (dig, state string, ok bool) {
	rest, found := strings.CutPrefix(string(v), rwDataPrefix)
	if !found {
		return "", "", false
	}
	dig, state, ok = strings.Cut(rest, " ")
	return dig, state, ok && dig != "" && state != ""
}

// rwFenceOf is the fence of a node in state with mzxid; 0 for a node not
// granted (or unreadable state).
func rwFenceOf(state string, mzxid int64) int64 {
	switch state {
	case rwWaiting:
		return 0
	case rwGranted:
		return mzxid
	}
	n, _ := strconv.ParseInt(state, 10, 64)
	return n
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
