package zkstore

import (
	"fmt"
	"strconv"
	"strings"

	"example.com/dlock/driver"
)

// Curator's InterProcessSemaphoreV2 layout: semaphore path P has a mutex
// at P/locks (InterProcessMutex nodes) and the leases at
// P/leases/_c_<UUID>-lease-<%010d sequence>, one node per permit.
const (
	semLocks    = "locks"
	semLeases   = "leases"
	leaseMarker = "lease-"
)

// semPath is the ZooKeeper path of semaphore name key.
func (s *Store) semPath(key string) string { return s.semRoot + "/" + encodeKey(s.prefix+key) }

// isLeaseNode reports whether child is named like a lease node: "lease-"
// and a sequence as %010d prints a signed 32-bit number at its end.
func isLeaseNode(child string) bool {
	i := strings.LastIndex(child, leaseMarker)
	if i < 0 {
		return false
	}
	seq := child[i+len(leaseMarker):]
	n, err := strconv.ParseInt(seq, 10, 32)
	return err == nil && fmt.Sprintf("%010d", n) == seq
}

// leaseName is the name function of our lease nodes.
func leaseName(uuid string) string { return protectedPrefix + uuid + "-" + leaseMarker }

// checkSemKey refuses (driver.ErrInvalid) a semaphore name with a
// "/"-separated part after the first named "locks" or "leases": its path
// would be a child directory of the name before it.
func (s *Store) checkSemKey(key string) error {
	segs := strings.Split(encodeKey(s.prefix+key), "/")
	for _, seg := range segs[1:] {
		if seg == semLocks || seg == semLeases {
			return fmt.Errorf("%w: zkstore: semaphore name %q: its part %q is a directory of the semaphore before it", driver.ErrInvalid, key, seg)
		}
	}
	return nil
}

// The data of our lease nodes, "dlock/sem <k> <token digest>", and of the
// leases directory, "dlock/sem-limit <n>": the limit stored with the key by
// the acquisition that found no permit out (Curator never stores it and
// leaves the directory's data empty).
const (
	semDataPrefix  = "dlock/sem "
	semLimitPrefix = "dlock/sem-limit "
)

func semData(k int, dig string) []byte { return []byte(semDataPrefix + strconv.Itoa(k) + " " + dig) }

// parseSemData reads a lease node's data; ok false for another's.
func parseSemData(v []byte) (k int, dig string, ok bool) {
	rest, found := strings.CutPrefix(string(v), semDataPrefix)
	if !found {
		return 0, "", false
	}
	ks, dig, found := strings.Cut(rest, " ")
	k, err := strconv.Atoi(ks)
	return k, dig, found && err == nil && k > 0 && dig != ""
}

// parseLimit reads the leases directory's data: the stored limit, 0 if
// none.
func parseLimit(v []byte) int {
	rest, found := strings.CutPrefix(string(v), semLimitPrefix)
	if !found {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0
	}
	return n
}
