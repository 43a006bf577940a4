package etcdstore

// SetFreshNames makes s create every holding and waiter under a new etcd
// key name instead of reusing a free one (the key naming before names were
// reused), for the negative control of TestKeyNamesReused.
func SetFreshNames(s *Store, on bool) {
	s.mu.Lock()
	s.fresh = on
	s.mu.Unlock()
}

// FamilyPrefixes returns the etcd prefixes of key as a Semaphore and as an
// RWMutex of a store with prefix pfx, for tests that count or read them.
func FamilyPrefixes(pfx, key string) (sem, rw string) {
	s := &Store{prefix: pfx}
	return s.famPfx(semTag, key), s.famPfx(rwTag, key)
}

// SetUnguarded makes s admit semaphore holders and readers without the
// revision guard (the negative control of the admission race tests).
func SetUnguarded(s *Store, on bool) {
	s.mu.Lock()
	s.unguarded = on
	s.mu.Unlock()
}

// SessionID returns the lease of s's session (0 if it has none).
func SessionID(s *Store) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		return 0
	}
	return int64(s.sess.id)
}
