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

// WithEarlyFence makes s's Transfer draw its fence in the VALUES row of its
// INSERT, which MariaDB evaluates before it meets the duplicate key and
// waits for its row lock: the wrong statement that TestTransferFenceOrder's
// control must catch. The arguments are Transfer's.
func WithEarlyFence(s *Store) {
	held := "owner = ? AND holds = 1 AND expires_at > " + now
	s.transferSQL = "INSERT INTO " + s.n.locks + " (name, owner, holds, fence, expires_at) VALUES (?, ?, 0, NEXTVAL(" + s.n.fence + "), '1970-01-01')" +
		" ON DUPLICATE KEY UPDATE" +
		" fence = IF(" + held + ", VALUES(fence), fence)," +
		" expires_at = IF(" + held + ", " + now + " + INTERVAL ? MICROSECOND, expires_at)," +
		" owner = IF(" + held + ", ?, owner)" +
		" RETURNING owner, holds, fence, " + remaining
}
