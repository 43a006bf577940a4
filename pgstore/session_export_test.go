package pgstore

// Abandon drops every pinned connection of s as a crashed process would:
// the sockets are closed without unlocking anything and without telling
// the store, which finds out on its next statement. For tests.
func (s *SessionStore) Abandon() {
	s.mu.Lock()
	pins := append([]*pinned(nil), s.pins...)
	s.mu.Unlock()
	for _, p := range pins {
		if p.c != nil {
			_ = p.c.Conn().PgConn().Conn().Close()
		}
	}
}

// Pinned returns how many connections s pins now. For tests.
func (s *SessionStore) Pinned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pins)
}

// LocalState returns how many entries s keeps for key (0 or 1). For tests.
func (s *SessionStore) LocalState(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if _, ok := s.keys[key]; ok {
		n++
	}
	if _, ok := registry.Load(s.regKey(key)); ok {
		n++
	}
	return n
}
