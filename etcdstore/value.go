package etcdstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"example.com/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// valuePrefix starts the value of every key the store writes:
// "dlock/1 <holds> <token digest>", and " <fence>" after it for a holding
// made by a transfer (Store.Transfer), whose fence is not its key's
// CreateRevision; then, for a holding with holder metadata
// (driver.MetaKeeper), a newline and the metadata (which holds no control
// characters: driver.ValidateMeta).
const valuePrefix = "dlock/1 "

// digest is what the store keeps of a token: 16 bytes of its SHA-256, in
// hex. It recognises the token (any Store of any process can release or
// renew a holding by its token, as on the other stores) without storing
// it.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

func value(holds int, dig string) string {
	return valuePrefix + strconv.Itoa(holds) + " " + dig
}

// valueFenced is value with the holding's fence, if it has one of its own
// (fence > 0: a transferred holding).
func valueFenced(holds int, dig string, fence int64) string {
	if fence <= 0 {
		return value(holds, dig)
	}
	return value(holds, dig) + " " + strconv.FormatInt(fence, 10)
}

// valueMeta is valueFenced with the holder metadata meta, if not empty.
func valueMeta(holds int, dig string, fence int64, meta string) string {
	if meta == "" {
		return valueFenced(holds, dig, fence)
	}
	return valueFenced(holds, dig, fence) + "\n" + meta
}

// lockValue is a parsed value: the hold count, the token digest (empty for
// etcdctl's keys, whose values are empty) and the fence written with it (0:
// none, the fence is the key's CreateRevision).
type lockValue struct {
	holds  int
	digest string
	fence  int64
	meta   string // holder metadata, "" if none
}

// parseValue reads a key's value: an empty value (etcdctl lock's keys) is
// one hold of an unknown token; a value that is neither is refused.
func parseValue(v []byte) (lockValue, error) {
	if len(v) == 0 {
		return lockValue{holds: 1}, nil
	}
	bad := fmt.Errorf("%w: etcdstore: key holds %q, not a lock's value", driver.ErrRefused, v)
	head, meta, _ := strings.Cut(string(v), "\n")
	f := strings.Fields(strings.TrimPrefix(head, valuePrefix))
	if !strings.HasPrefix(head, valuePrefix) || len(f) < 2 || len(f) > 3 || len(f[1]) < 24 {
		return lockValue{}, bad
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return lockValue{}, bad
	}
	lv := lockValue{holds: n, digest: f[1], meta: meta}
	if len(f) == 3 {
		if lv.fence, err = strconv.ParseInt(f[2], 10, 64); err != nil || lv.fence < 1 {
			return lockValue{}, bad
		}
	}
	return lv, nil
}

// fenceOf is the fence of the holding at kv as the key itself tells it:
// the fence written with a transfer, else its CreateRevision. (A holding
// that waited in the queue has the revision at which it became the holder
// as its fence, which only the Store that holds it knows.)
func fenceOf(kv *mvccpb.KeyValue) int64 {
	if v, err := parseValue(kv.Value); err == nil && v.fence > kv.CreateRevision {
		return v.fence
	}
	return kv.CreateRevision
}

// mine reports whether kv is a holding of the token with digest dig, and
// its hold count.
func mine(kv *mvccpb.KeyValue, dig string) (int, bool) {
	if kv == nil {
		return 0, false
	}
	v, err := parseValue(kv.Value)
	if err != nil || v.digest != dig {
		return 0, false
	}
	return v.holds, true
}
