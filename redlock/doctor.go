package redlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var _ driver.Doctor = (*Store)(nil)

// Doctor implements driver.Doctor: every node's own checks (a RedisNode's
// are redisstore's), run in parallel and named NODE/CHECK, where NODE is the
// node's address (127.0.0.1:6379/version; "node N" for a node that is not a
// RedisNode), then the store's own:
//
//   - nodes: how many failures the node count tolerates (Warn below 3, or
//     for an even count, which tolerates no more than one node fewer);
//   - quorum: how many nodes answer (Fail when fewer than a majority, Warn
//     when some do not);
//   - independence: the nodes are distinct servers (Fail when two nodes
//     report the same run_id: one server counted twice, a majority that is
//     not one) and none replicates another (each node's replication check
//     says so);
//   - fencing: whether grants carry fencing tokens (Warn when not).
//
// A node that cannot run checks is reported as a Warn NODE/doctor.
func (s *Store) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	labels := s.nodeLabels()
	per := make([][]driver.Check, len(s.nodes))
	runIDs := make([]string, len(s.nodes))
	var wg sync.WaitGroup
	for i, n := range s.nodes {
		wg.Go(func() {
			d, ok := driver.As[driver.Doctor](n)
			if !ok {
				per[i] = []driver.Check{{Name: "doctor", Status: driver.Warn, Detail: fmt.Sprintf("node %d (%T) has no checks of its own", i, n)}}
				return
			}
			per[i] = d.Doctor(ctx, ttl)
			if rn, ok := n.(*RedisNode); ok && answers(per[i]) {
				runIDs[i] = rn.runID(ctx)
			}
		})
	}
	wg.Wait()
	var out []driver.Check
	up := 0
	for i, checks := range per {
		if answers(checks) {
			up++
		}
		for _, c := range checks {
			c.Name = labels[i] + "/" + c.Name
			out = append(out, c)
		}
	}
	out = append(out, s.nodesCheck(), s.quorumCheck(up), independenceCheck(labels, runIDs), s.fencingCheck())
	return out
}

// answers reports whether a node's checks say it answered: no Fail named
// connection.
func answers(checks []driver.Check) bool {
	for _, c := range checks {
		if c.Name == "connection" && c.Status == driver.Fail {
			return false
		}
	}
	return true
}

// nodeLabels names each node by its server's address (made unique with
// #index when two nodes share one), or "node N".
func (s *Store) nodeLabels() []string {
	labels := make([]string, len(s.nodes))
	seen := map[string]int{}
	for i, n := range s.nodes {
		labels[i] = "node " + strconv.Itoa(i)
		if rn, ok := n.(*RedisNode); ok {
			if rc, ok := rn.client.(*redis.Client); ok {
				labels[i] = rc.Options().Addr
			}
		}
		seen[labels[i]]++
	}
	for i, l := range labels {
		if seen[l] > 1 {
			labels[i] = l + "#" + strconv.Itoa(i)
		}
	}
	return labels
}

// runID is the server's INFO run_id, "" if it cannot be read.
func (n *RedisNode) runID(ctx context.Context) string {
	info, err := n.client.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	return ""
}

func (s *Store) nodesCheck() driver.Check {
	n, q := len(s.nodes), s.quorum
	d := fmt.Sprintf("%d nodes, quorum %d: tolerates %d failed node(s)", n, q, n-q)
	switch {
	case n < 3:
		return driver.Check{Name: "nodes", Status: driver.Warn, Detail: d + "; fix: use at least 3 independent primaries (5 recommended)"}
	case n%2 == 0:
		return driver.Check{Name: "nodes", Status: driver.Warn, Detail: d + ", no more than with one node fewer; fix: use an odd number of nodes"}
	}
	return driver.Check{Name: "nodes", Status: driver.OK, Detail: d}
}

func (s *Store) quorumCheck(up int) driver.Check {
	n, q := len(s.nodes), s.quorum
	d := fmt.Sprintf("%d of %d nodes answer, %d needed", up, n, q)
	switch {
	case up < q:
		return driver.Check{Name: "quorum", Status: driver.Fail, Detail: d + ": no lock can be taken; fix: bring the failed nodes back (after the longest lease, if they lost their data)"}
	case up < n:
		return driver.Check{Name: "quorum", Status: driver.Warn, Detail: fmt.Sprintf("%s: %d more failure(s) stop locking; fix: bring the failed nodes back", d, up-q+1)}
	}
	return driver.Check{Name: "quorum", Status: driver.OK, Detail: d}
}

// independenceCheck fails when two nodes are one server (the same run_id).
func independenceCheck(labels, runIDs []string) driver.Check {
	byID := map[string][]string{}
	known := 0
	for i, id := range runIDs {
		if id != "" {
			byID[id] = append(byID[id], labels[i])
			known++
		}
	}
	var dups []string
	for _, ls := range byID {
		if len(ls) > 1 {
			slices.Sort(ls)
			dups = append(dups, strings.Join(ls, " = "))
		}
	}
	slices.Sort(dups)
	if len(dups) > 0 {
		return driver.Check{Name: "independence", Status: driver.Fail, Detail: "the same server appears as several nodes (" + strings.Join(dups, "; ") +
			"): its vote counts more than once, so two owners can each win a \"majority\"; fix: give each node its own primary"}
	}
	return driver.Check{Name: "independence", Status: driver.OK, Detail: fmt.Sprintf("%d answering node(s) are distinct servers (INFO run_id); see each node's replication check", known)}
}

func (s *Store) fencingCheck() driver.Check {
	if s.fencing {
		return driver.Check{Name: "fencing", Status: driver.OK, Detail: "grants carry fencing tokens (raised on a majority after each first acquisition)"}
	}
	return driver.Check{Name: "fencing", Status: driver.Warn, Detail: "grants carry no fencing token (fencing=false, or a node cannot raise fences); fix: leave fencing on to protect resources from a stale holder"}
}
