package redisstore

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

// Doctor implements driver.Doctor with the checks that matter for locking on
// Redis, each OK, Warn or Fail with what was found and, when not OK, what to
// do ("…; fix: …" at the end of Detail):
//
//   - connection: the server answers PING (Fail otherwise, and no other
//     check of that server runs: what it would allow is unknown);
//   - version: Redis 7.0 or later (Fail: the scripts are tested on 7.0 and later only);
//   - maxmemory-policy: noeviction (Fail for a volatile-* or allkeys-*
//     policy: eviction can free a held lock);
//   - persistence: appendonly yes with appendfsync always keeps held locks
//     across a restart (Warn otherwise);
//   - replication: a primary with asynchronous replicas can lose a lock in a
//     failover (Warn); a connection to a replica Fails;
//   - latency: the median of 5 PINGs (Warn above 20 ms, or above ttl/100);
//   - acl: the commands the store needs (EVALSHA, EVAL, SCRIPT LOAD,
//     SUBSCRIBE, PUBLISH, TIME and the string commands of its scripts,
//     PUBSUB NUMSUB and SCAN for Waiters and List), by ACL DRYRUN where the
//     user may run it, else by running them on a throw-away key that
//     expires within a second (Warn naming the denied ones, and the ACL
//     rules that allow them);
//   - cluster (on a Cluster): CLUSTER INFO reports cluster_state ok, and
//     every primary answers;
//   - sentinel (on a store opened from a redis+sentinel:// URL): every
//     Sentinel answers, they agree on the primary, and each can authorise a
//     failover (SENTINEL CKQUORUM). A store made with New over a
//     FailoverClient cannot tell, and skips it.
//
// A check that cannot run (INFO or CONFIG forbidden to the user) is a Warn
// "cannot check: …". On a Cluster the per-server checks run on every
// primary and are named SERVER/CHECK (127.0.0.1:7000/version); on one
// server (or a Sentinel-managed primary) they carry the check's name alone.
// Nothing is left behind but the throw-away key of the acl check.
func (s *Store) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return s.clusterDoctor(ctx, cc, ttl)
	}
	return orUnreachable(ctx, s.client, func() []driver.Check {
		checks := append(serverChecks(ctx, s.client, ttl), aclCheck(ctx, s.client, s.prefix, s.fair))
		if s.sentinel != nil {
			checks = append(checks, sentinelCheck(ctx, s.sentinel))
		}
		return checks
	})
}

func (s *Store) clusterDoctor(ctx context.Context, cc *redis.ClusterClient, ttl time.Duration) []driver.Check {
	out := orUnreachable(ctx, cc, func() []driver.Check {
		return []driver.Check{clusterCheck(ctx, cc), aclCheck(ctx, cc, s.prefix, s.fair)}
	})
	if len(out) == 1 { // unreachable
		return out
	}
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		checks := orUnreachable(ctx, n, func() []driver.Check { return serverChecks(ctx, n, ttl) })
		mu.Lock()
		defer mu.Unlock()
		for _, c := range checks {
			c.Name = n.Options().Addr + "/" + c.Name
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		out = append(out, check("cluster", driver.Fail, "cannot reach every primary: "+oneLine(err), "check the cluster's health (CLUSTER INFO, CLUSTER NODES)"))
	}
	slices.SortStableFunc(out, func(a, b driver.Check) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// check builds a Check, appending the fix to the detail when not OK.
func check(name string, st driver.Status, detail, fix string) driver.Check {
	if st != driver.OK && fix != "" {
		detail += "; fix: " + fix
	}
	return driver.Check{Name: name, Status: st, Detail: detail}
}

// orUnreachable runs checks if c answers a PING, and otherwise returns the
// single Fail that says it does not: checks run against a server that
// refuses connections would report causes (INFO, ACL) that are not the
// problem, or pass without having asked anything.
func orUnreachable(ctx context.Context, c redis.Cmdable, checks func() []driver.Check) []driver.Check {
	if err := c.Ping(ctx).Err(); err != nil {
		return []driver.Check{check("connection", driver.Fail, "does not answer: "+oneLine(err),
			"start the server or fix its address; nothing else could be checked")}
	}
	return checks()
}

// serverChecks runs the per-server checks against one Redis server.
func serverChecks(ctx context.Context, c redis.Cmdable, ttl time.Duration) []driver.Check {
	info, infoErr := parseInfo(c.Info(ctx).Result())
	cfg := func(name string) (string, error) {
		m, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", err
		}
		v, ok := m[name]
		if !ok {
			return "", fmt.Errorf("CONFIG GET %s returned nothing", name)
		}
		return v, nil
	}
	return []driver.Check{
		versionCheck(info, infoErr),
		evictionCheck(info, infoErr, cfg),
		persistenceCheck(info, infoErr, cfg),
		replicationCheck(info, infoErr),
		latencyCheck(ctx, c, ttl),
	}
}

func parseInfo(s string, err error) (map[string]string, error) {
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

func cannot(name string, err error, fix string) driver.Check {
	return check(name, driver.Warn, "cannot check: "+oneLine(err), fix)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

func versionCheck(info map[string]string, err error) driver.Check {
	const name, fix = "version", "upgrade to Redis 7.0 or later"
	if err != nil {
		return cannot(name, err, "allow INFO for this user to check the version")
	}
	v := info["redis_version"]
	if major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0]); major >= 7 {
		return check(name, driver.OK, "redis "+v, "")
	}
	return check(name, driver.Fail, "redis "+v+" is older than 7.0: the scripts are tested on 7.0 and later only", fix)
}

func evictionCheck(info map[string]string, infoErr error, cfg func(string) (string, error)) driver.Check {
	const name = "maxmemory-policy"
	const fix = "CONFIG SET maxmemory-policy noeviction (and set it in redis.conf), or keep locks on a Redis of their own"
	policy, maxmem := info["maxmemory_policy"], info["maxmemory"]
	if policy == "" {
		var err error
		if policy, err = cfg("maxmemory-policy"); err != nil {
			return cannot(name, fmt.Errorf("%w (and INFO: %v)", err, infoErr), fix)
		}
	}
	switch {
	case policy == "noeviction":
		return check(name, driver.OK, "noeviction: lock keys are never evicted", "")
	case strings.HasPrefix(policy, "volatile-") || strings.HasPrefix(policy, "allkeys-"):
		d := policy + ": under memory pressure Redis evicts keys, lock keys included (they all have a TTL), and another client then gets a lock that is still held"
		if maxmem == "0" {
			d += " (maxmemory is 0 now, so nothing is evicted yet, but any maxmemory setting would start it)"
		}
		return check(name, driver.Fail, d, fix)
	}
	return check(name, driver.Warn, "unknown policy "+policy, fix)
}

func persistenceCheck(info map[string]string, infoErr error, cfg func(string) (string, error)) driver.Check {
	const name = "persistence"
	const fix = "appendonly yes and appendfsync always, so that held locks survive a restart"
	aof := info["aof_enabled"]
	if aof == "" {
		v, err := cfg("appendonly")
		if err != nil {
			return cannot(name, fmt.Errorf("%w (and INFO: %v)", err, infoErr), fix)
		}
		aof = map[string]string{"yes": "1"}[v]
	}
	if aof != "1" {
		return check(name, driver.Warn, "appendonly no: a restart forgets every held lock, and another client can then take one that is still held (fences still increase: they come from the server's clock)", fix)
	}
	fsync, err := cfg("appendfsync")
	switch {
	case err != nil:
		return cannot(name, fmt.Errorf("appendonly yes, appendfsync unknown: %w", err), fix)
	case fsync == "always":
		return check(name, driver.OK, "appendonly yes, appendfsync always: held locks survive a restart", "")
	}
	return check(name, driver.Warn, "appendonly yes, appendfsync "+fsync+": a crash loses up to a second of writes, so a restarted server can grant a lock still held (fences still increase: they come from the server's clock)", fix)
}

func replicationCheck(info map[string]string, err error) driver.Check {
	const name = "replication"
	if err != nil {
		return cannot(name, err, "allow INFO for this user to check replication")
	}
	role, replicas := info["role"], info["connected_slaves"]
	switch {
	case role == "slave" || role == "replica":
		return check(name, driver.Fail, "connected to a replica: lock writes fail or are lost",
			"point dlock at the primary (or use redis+sentinel:// or redis+cluster://)")
	case replicas == "" || replicas == "0":
		return check(name, driver.OK, "primary without replicas: no failover can hand out a lock twice (a crash loses locks; see persistence)", "")
	}
	return check(name, driver.Warn, "primary with "+replicas+" replica(s), replicated asynchronously: a failover can lose a lock acquired just before it",
		"use fencing tokens at the protected resource, or redlock:// over independent primaries")
}

// latencyProbes is the number of PINGs whose median is reported.
const latencyProbes = 5

func latencyCheck(ctx context.Context, c redis.Cmdable, ttl time.Duration) driver.Check {
	const name = "latency"
	rtts := make([]time.Duration, 0, latencyProbes)
	for range latencyProbes {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return check(name, driver.Fail, "PING failed: "+oneLine(err), "check the network and the server")
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	med := rtts[len(rtts)/2]
	d := fmt.Sprintf("median round trip %v over %d PINGs", med.Round(10*time.Microsecond), latencyProbes)
	limit := 20 * time.Millisecond
	if ttl > 0 {
		limit = min(limit, ttl/100)
	}
	if med > limit {
		return check(name, driver.Warn, fmt.Sprintf("%s, above %v: every acquire and renewal costs a round trip; keep leases ≥ 100× this", d, limit),
			"run dlock close to Redis, or use longer leases")
	}
	return check(name, driver.OK, d, "")
}

// clusterCheck reads CLUSTER INFO through any node.
func clusterCheck(ctx context.Context, cc *redis.ClusterClient) driver.Check {
	const name = "cluster"
	info, err := parseInfo(cc.ClusterInfo(ctx).Result())
	if err != nil {
		return cannot(name, err, "allow CLUSTER INFO for this user to check the cluster's state")
	}
	d := fmt.Sprintf("cluster_state %s, %s known nodes, %s primaries serving slots", info["cluster_state"], info["cluster_known_nodes"], info["cluster_size"])
	if info["cluster_state"] != "ok" {
		return check(name, driver.Fail, d+": the cluster refuses commands for some slots", "check CLUSTER NODES for failed primaries and uncovered slots")
	}
	return check(name, driver.OK, d, "")
}
