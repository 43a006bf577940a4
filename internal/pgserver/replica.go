package pgserver

import (
	"fmt"
	"os"
	"testing"

	"example.com/dlock/internal/proc"
)

// StartReplica starts a streaming replica of s (a hot standby: it answers
// reads and refuses writes), made with pg_basebackup -R in a new temporary
// directory, and removes it when the test ends. It skips the test when
// pg_basebackup is missing (fails under CI=true).
func (s *Server) StartReplica(t testing.TB) *Server {
	t.Helper()
	bb := Find("pg_basebackup")
	if bb == "" {
		proc.Missing(t, "pgserver: pg_basebackup not found", "Debian's postgresql")
	}
	r, err := s.LaunchReplica(bb)
	return proc.Launched(t, "pgserver: replica", r, err, (*Server).Remove)
}

// LaunchReplica is StartReplica without a test: bb is pg_basebackup's path.
// The caller must call Remove (also after an error, when the replica is not
// nil).
func (s *Server) LaunchReplica(bb string) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgserver-replica-")
	if err != nil {
		return nil, err
	}
	r := &Server{Dir: dir, bins: map[string]string{}, cred: s.cred}
	for k, v := range s.bins {
		r.bins[k] = v
	}
	r.bins["pg_basebackup"] = bb
	if r.cred != nil {
		if err := os.Chown(dir, int(r.cred.Uid), int(r.cred.Gid)); err != nil {
			return r, err
		}
	}
	out, err := r.command("pg_basebackup", "-h", "127.0.0.1", "-p", fmt.Sprint(s.Port), "-U", "postgres",
		"-D", r.dataDir(), "-R", "-X", "stream", "--no-sync", "-c", "fast").CombinedOutput()
	if err != nil {
		return r, fmt.Errorf("pg_basebackup: %w\n%s", err, proc.Tail(string(out), 4000))
	}
	if r.Port, err = proc.FreePort(); err != nil {
		return r, err
	}
	if err := r.start(); err != nil {
		return r, err
	}
	if err := r.WaitReady(startTimeout); err != nil {
		return r, fmt.Errorf("%w\n--- replica log:\n%s", err, proc.Tail(r.Log(), 4000))
	}
	return r, nil
}
