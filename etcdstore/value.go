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
// "dlock/1 <holds> <token digest>".
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

// lockValue is a parsed value: the hold count and the token digest (empty
// for etcdctl's keys, whose values are empty).
type lockValue struct {
	holds  int
	digest string
}

// parseValue reads a key's value: an empty value (etcdctl lock's keys) is
// one hold of an unknown token; a value that is neither is refused.
func parseValue(v []byte) (lockValue, error) {
	if len(v) == 0 {
		return lockValue{holds: 1}, nil
	}
	f := strings.Fields(strings.TrimPrefix(string(v), valuePrefix))
	if !strings.HasPrefix(string(v), valuePrefix) || len(f) != 2 {
		return lockValue{}, fmt.Errorf("%w: etcdstore: key holds %q, not a lock's value", driver.ErrRefused, v)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return lockValue{}, fmt.Errorf("%w: etcdstore: key holds %q, not a lock's value", driver.ErrRefused, v)
	}
	return lockValue{holds: n, digest: f[1]}, nil
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
