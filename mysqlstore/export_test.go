package mysqlstore

// ConnIDs returns the server ids of the connections the Session pins.
func (s *Session) ConnIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for _, pc := range s.conns {
		ids = append(ids, pc.id)
	}
	return ids
}
