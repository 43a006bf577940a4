package pgstore

// Abandon drops every pinned connection of s as a crashed process would:
// the sockets are closed without unlocking anything and without telling
// the store, which finds out on its next statement. For tests.
func (s *SessionStore) Abandon() {
	for _, p := range s.eng.Pins.Conns(true) {
		_ = p.C.Conn().PgConn().Conn().Close()
	}
}

// Pinned returns how many connections s pins now. For tests.
func (s *SessionStore) Pinned() int {
	return s.eng.Pins.Len()
}

// LocalState returns how many entries s keeps for key (0 to 3: the Mutex engine, the registry, the read-write keys). For tests.
func (s *SessionStore) LocalState(key string) int {
	n := 0
	if s.eng.Tracked(key) {
		n++
	}
	if _, ok := registry.Load(s.regKey(key)); ok {
		n++
	}
	s.rwMu.Lock()
	if _, ok := s.rwKeys[key]; ok {
		n++
	}
	s.rwMu.Unlock()
	return n
}

// WithoutSharedCheck turns off s's first-use check for a pooler that shares
// server sessions (PgBouncer in transaction mode). For tests.
func WithoutSharedCheck(s *SessionStore) { s.noSharedCheck = true }

// WithoutSharedGuard makes s's lock statements take a lock that their own
// server session already holds (a re-entry on the server), as they did
// before the guard. For the negative control of the shared-session tests.
func WithoutSharedGuard(s *SessionStore) { s.noSharedGuard = true }

// GuardedLockSQL returns the session store's lock statements (try, and
// queued), with and without their shared-session guard; parameters: the
// lock id, its two pg_locks halves (LockIDParts), the fence sequence. For
// tests.
func GuardedLockSQL(guard bool) (try, queued string) {
	s := &SessionStore{noSharedGuard: !guard}
	return s.guarded(tryLockSQL), s.guarded(lockSQL)
}

// LockIDParts returns id as pg_locks shows it: classid, objid. For tests.
func LockIDParts(id int64) (uint32, uint32) { return split(id) }

// WithoutQueuedWriterCheck drops the check of s's AcquireRead for a backend
// queued in pg_advisory_lock(RWLockID). For tests.
func WithoutQueuedWriterCheck(s *SessionStore) { s.noQueuedCheck = true }
