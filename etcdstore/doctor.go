package etcdstore

import (
	"context"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// Doctor implements driver.Doctor: server versions, members and quorum, a
// leader, the session TTL against the server's minimum lease TTL, and a
// probe lock taken and released. It makes no lasting change.
func (s *Store) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	var checks driver.Report
	add := checks.Add
	members, err := s.cli.MemberList(ctx)
	if err != nil {
		add("members", driver.Fail, "member list: %v", err)
		return checks
	}
	n, up, leader := len(members.Members), 0, uint64(0)
	var versions []string
	for _, m := range members.Members {
		if len(m.ClientURLs) == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := s.cli.Status(sctx, m.ClientURLs[0])
		cancel()
		if err != nil {
			versions = append(versions, m.Name+"=unreachable")
			continue
		}
		up++
		leader = max(leader, st.Leader)
		versions = append(versions, m.Name+"="+st.Version)
	}
	add("version", driver.OK, "%s", strings.Join(versions, ", "))
	quorum := n/2 + 1
	switch {
	case up >= quorum && up == n:
		add("quorum", driver.OK, "%d of %d members answer", up, n)
	case up >= quorum:
		add("quorum", driver.Warn, "%d of %d members answer: one more failure may lose quorum", up, n)
	default:
		add("quorum", driver.Fail, "%d of %d members answer, %d needed: locks cannot be taken", up, n, quorum)
	}
	if leader == 0 {
		add("leader", driver.Fail, "no member reports a leader")
	} else {
		add("leader", driver.OK, "leader %x", leader)
	}
	s.checkTTL(ctx, add)
	return append(checks, driver.ProbeLock(ctx, s, ttl, ""))
}

// checkTTL grants a 1 s probe lease: the server raises it to its minimum.
func (s *Store) checkTTL(ctx context.Context, add func(string, driver.Status, string, ...any)) {
	resp, err := s.cli.Grant(ctx, 1)
	if err != nil {
		add("session TTL", driver.Fail, "probe lease: %v", err)
		return
	}
	_, _ = s.cli.Revoke(ctx, resp.ID)
	minTTL := time.Duration(resp.TTL) * time.Second
	if s.ttl < minTTL {
		add("session TTL", driver.Fail, "session TTL %v is below the server's minimum lease TTL %v: raise it", s.ttl, minTTL)
		return
	}
	add("session TTL", driver.OK, "session TTL %v; the server's minimum lease TTL is %v", s.ttl, minTTL)
}
