package etcdstore

// SetFreshNames makes s create every holding and waiter under a new etcd
// key name instead of reusing a free one (the key naming before names were
// reused), for the negative control of TestKeyNamesReused.
func SetFreshNames(s *Store, on bool) {
	s.mu.Lock()
	s.fresh = on
	s.mu.Unlock()
}
