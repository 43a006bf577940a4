package zkstore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"example.com/dlock/driver"
)

// The node names of Curator's InterProcessMutex (StandardLockInternalsDriver
// with protection): <lock path>/_c_<UUID>-lock-<%010d sequence>.
const (
	protectedPrefix = "_c_"
	lockMarker      = "lock-"
	uuidLen         = 36
)

// newUUID returns a random (version 4) UUID in canonical form, 36
// characters with dashes, as java.util.UUID.toString prints it.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// nodePrefix is the name our create asks for; ZooKeeper appends the
// sequence.
func nodePrefix(uuid string) string { return protectedPrefix + uuid + "-" + lockMarker }

// hasUUID reports whether child name was created with uuid (Curator's
// protected-mode test: the name starts with _c_<uuid>-).
func hasUUID(child, uuid string) bool {
	return strings.HasPrefix(child, protectedPrefix+uuid+"-")
}

// isLockNode reports whether child is named like a lock node: its name
// ends in "lock-" followed by a ZooKeeper sequence, exactly as %010d prints
// a signed 32-bit number (10 digits, or a minus sign and 9 or 10 digits).
// ZooKeeper appends that sequence to every EPHEMERAL_SEQUENTIAL node, so
// every lock node of Curator's InterProcessMutex (protected or not),
// go-zookeeper's Lock and this store ends so; the container of a nested
// lock name does not, unless its name is one checkName refuses.
func isLockNode(child string) bool {
	i := strings.LastIndex(child, lockMarker)
	if i < 0 {
		return false
	}
	seq := child[i+len(lockMarker):]
	n, err := strconv.ParseInt(seq, 10, 32)
	return err == nil && fmt.Sprintf("%010d", n) == seq
}

// checkName returns an error matching driver.ErrInvalid if the lock name
// name (the store's Prefix included) has a "/"-separated part, after the
// first, named like a lock node (isLockNode, on the part as encodeKey
// writes it): that part's container is a child of the lock path of the
// name before it, and would be counted as a holder there. Nil otherwise.
func checkName(name string) error {
	segs := strings.Split(encodeKey(name), "/")
	for _, seg := range segs[1:] {
		if isLockNode(seg) {
			return fmt.Errorf("%w: zkstore: lock name %q: its part %q ends in \"lock-\" and a 10-digit sequence, as a lock node's name does: "+
				"its path would hold the name before it", driver.ErrInvalid, name, seg)
		}
	}
	return nil
}

// sortKey is Curator's ordering key (StandardLockInternalsDriver
// .fixForSorting): the part after the last "lock-", or the whole name for a
// child without one.
func sortKey(child string) string {
	if i := strings.LastIndex(child, lockMarker); i >= 0 {
		return child[i+len(lockMarker):]
	}
	return child
}

// sortChildren orders children as Curator does: by sortKey, as strings
// (stable, so equal keys keep the server's order).
func sortChildren(children []string) {
	sort.SliceStable(children, func(i, j int) bool { return sortKey(children[i]) < sortKey(children[j]) })
}

// wrapped reports whether some child is a lock node whose sequence printed
// negative: ZooKeeper's sequence is the parent's signed 32-bit cversion,
// which goes negative after 2^31 child creations and deletions under one
// lock path. Curator's string order then puts the newest nodes first (and
// orders negative sequences backwards), so two owners could each believe
// they are first. While such a node exists the store takes no holding on
// that path (see docs: the counter restarts when the path is empty and
// deleted).
func wrapped(children []string) bool {
	for _, c := range children {
		if i := strings.LastIndex(c, lockMarker); i >= 0 && strings.HasPrefix(c[i+len(lockMarker):], "-") {
			return true
		}
	}
	return false
}

// errWrapped is returned when a lock path's sequence counter wrapped.
func errWrapped(path string) error {
	return fmt.Errorf("%w: zkstore: the sequence counter of %s went past 2^31 (negative sequences break Curator's order); the path must empty and be deleted first", driver.ErrUnavailable, path)
}

// sequence parses the sequence of a lock node name; false if it has none.
func sequence(child string) (int32, bool) {
	i := strings.LastIndex(child, lockMarker)
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(child[i+len(lockMarker):], 10, 32)
	return int32(n), err == nil
}

// encodeKey maps a lock name to a path relative to the store's root. Each
// "/"-separated segment is kept as it is when ZooKeeper accepts it (so that
// a Curator service locking <root>/orders/42 and a dlock key "orders/42"
// meet at one path); a byte that ZooKeeper refuses in a path (control
// characters, DEL, the C1 range, the surrogate and private-use ranges,
// U+FFF0..U+FFFF, invalid UTF-8) and '%' itself are written %XX. The
// segments ZooKeeper refuses whole are written "%2E" and "%2E%2E" ("." and
// ".."), and "%" (an empty segment). decodeKey reverses it.
func encodeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		switch seg {
		case "":
			segs[i] = "%"
			continue
		case ".":
			segs[i] = "%2E"
			continue
		case "..":
			segs[i] = "%2E%2E"
			continue
		}
		segs[i] = escapeSegment(seg)
	}
	return strings.Join(segs, "/")
}

func escapeSegment(seg string) string {
	var b strings.Builder
	for i := 0; i < len(seg); {
		r, n := utf8.DecodeRuneInString(seg[i:])
		if r == '%' || !pathRune(r) || (r == utf8.RuneError && n == 1) {
			for _, c := range []byte(seg[i : i+n]) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		} else {
			b.WriteString(seg[i : i+n])
		}
		i += n
	}
	return b.String()
}

// pathRune reports whether ZooKeeper accepts r in a path
// (PathUtils.validatePath).
func pathRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f, r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0:
		return false
	}
	return true
}

// decodeKey reverses encodeKey; false if rel is not what encodeKey writes.
func decodeKey(rel string) (string, bool) {
	segs := strings.Split(rel, "/")
	for i, seg := range segs {
		if seg == "%" {
			segs[i] = ""
			continue
		}
		var b []byte
		for j := 0; j < len(seg); j++ {
			if seg[j] != '%' {
				b = append(b, seg[j])
				continue
			}
			if j+2 >= len(seg) {
				return "", false
			}
			v, err := strconv.ParseUint(seg[j+1:j+3], 16, 8)
			if err != nil {
				return "", false
			}
			b = append(b, byte(v))
			j += 2
		}
		segs[i] = string(b)
	}
	return strings.Join(segs, "/"), true
}

// dataPrefix starts the data of every node the store creates:
// "dlock/1 <holds> <token digest>[ <fence>]", then, for a holding with
// holder metadata (driver.MetaKeeper), a newline and the metadata (which
// has no control characters: driver.ValidateMeta).
const dataPrefix = "dlock/1 "

// transferMark in the fence field means "the fence is this node's mzxid":
// a transfer cannot know the zxid of its own write, and writes nothing else
// to the node until the next setData, which writes the number.
const transferMark = "t"

// digest is what the store keeps of a token: 16 bytes of its SHA-256, in
// hex. It recognises the token without storing it.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// nodeData is a node's data: holds, the digest, if not empty the fence
// field (absent: the fence is the node's czxid), and if not empty the
// holder metadata.
func nodeData(holds int, dig, fence, meta string) []byte {
	d := dataPrefix + strconv.Itoa(holds) + " " + dig
	if fence != "" {
		d += " " + fence
	}
	if meta != "" {
		d += "\n" + meta
	}
	return []byte(d)
}

// lockData is a parsed dlock node's data.
type lockData struct {
	holds int
	dig   string
	fence string // "", transferMark or a decimal zxid
	meta  string // holder metadata, "" if none
}

// parseData reads a lock node's data; ok false for any other data
// (Curator's nodes carry the client's IP address).
func parseData(v []byte) (d lockData, ok bool) {
	head, meta, _ := strings.Cut(string(v), "\n")
	rest, found := strings.CutPrefix(head, dataPrefix)
	if !found {
		return d, false
	}
	f := strings.Fields(rest)
	if len(f) != 2 && len(f) != 3 {
		return d, false
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return d, false
	}
	d = lockData{holds: n, dig: f[1], meta: meta}
	if len(f) == 3 {
		if f[2] != transferMark {
			if _, err := strconv.ParseInt(f[2], 10, 64); err != nil {
				return lockData{}, false
			}
		}
		d.fence = f[2]
	}
	return d, true
}

// fenceOf is the fence of a node with data d and stat st.
func fenceOf(d lockData, czxid, mzxid int64) int64 {
	switch d.fence {
	case "":
		return czxid
	case transferMark:
		return mzxid
	}
	n, _ := strconv.ParseInt(d.fence, 10, 64)
	return n
}
