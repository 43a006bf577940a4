package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Check statuses, from harmless to unsafe.
const (
	statusOK   = "OK"
	statusWarn = "WARN"
	statusFail = "FAIL"
)

// check is one line of the doctor's checklist.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// nodeChecks runs the per-server checks against one Redis server.
func nodeChecks(ctx context.Context, c redis.Cmdable) []check {
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
	return []check{
		versionCheck(info, infoErr),
		evictionCheck(info, infoErr, cfg),
		persistenceCheck(info, infoErr, cfg),
		replicationCheck(info, infoErr),
		latencyCheck(ctx, c),
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

func cannot(name string, err error, fix string) check {
	return check{Name: name, Status: statusWarn, Detail: "cannot check: " + oneLine(err), Fix: fix}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

func versionCheck(info map[string]string, err error) check {
	const name, fix = "version", "upgrade to Redis 7.0 or later"
	if err != nil {
		return cannot(name, err, "allow INFO for this user to check the version")
	}
	v := info["redis_version"]
	if major, _ := parseVersion(v); major >= 7 {
		return check{Name: name, Status: statusOK, Detail: "redis " + v}
	}
	return check{Name: name, Status: statusFail, Detail: "redis " + v + " is older than 7.0: dlock's acquire script uses SET with both NX and GET, which it refuses", Fix: fix}
}

func parseVersion(v string) (major, minor int) {
	parts := strings.SplitN(v, ".", 3)
	major, _ = strconv.Atoi(parts[0])
	if len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	return major, minor
}

func evictionCheck(info map[string]string, infoErr error, cfg func(string) (string, error)) check {
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
		return check{Name: name, Status: statusOK, Detail: "noeviction: lock keys are never evicted"}
	case strings.HasPrefix(policy, "volatile-") || strings.HasPrefix(policy, "allkeys-"):
		d := policy + ": under memory pressure Redis evicts keys, lock keys included (they all have a TTL), and another client then gets a lock that is still held"
		if maxmem == "0" {
			d += " (maxmemory is 0 now, so nothing is evicted yet, but any maxmemory setting would start it)"
		}
		return check{Name: name, Status: statusFail, Detail: d, Fix: fix}
	}
	return check{Name: name, Status: statusWarn, Detail: "unknown policy " + policy, Fix: fix}
}

func persistenceCheck(info map[string]string, infoErr error, cfg func(string) (string, error)) check {
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
		return check{Name: name, Status: statusWarn, Fix: fix,
			Detail: "appendonly no: a restart forgets every held lock, and another client can then take one that is still held (fences still increase: they come from the server's clock)"}
	}
	fsync, err := cfg("appendfsync")
	switch {
	case err != nil:
		return cannot(name, fmt.Errorf("appendonly yes, appendfsync unknown: %w", err), fix)
	case fsync == "always":
		return check{Name: name, Status: statusOK, Detail: "appendonly yes, appendfsync always: held locks survive a restart"}
	}
	return check{Name: name, Status: statusWarn, Fix: fix,
		Detail: "appendonly yes, appendfsync " + fsync + ": a crash loses up to a second of writes, so a restarted server can grant a lock still held (fences still increase: they come from the server's clock)"}
}

func replicationCheck(info map[string]string, err error) check {
	const name = "replication"
	if err != nil {
		return cannot(name, err, "allow INFO for this user to check replication")
	}
	role, replicas := info["role"], info["connected_slaves"]
	switch {
	case role == "slave" || role == "replica":
		return check{Name: name, Status: statusFail, Detail: "connected to a replica: lock writes fail or are lost",
			Fix: "point dlock at the primary (or use --redis-sentinel / --redis-cluster)"}
	case replicas == "" || replicas == "0":
		return check{Name: name, Status: statusOK, Detail: "primary without replicas: no failover can hand out a lock twice (a crash loses locks; see persistence)"}
	}
	return check{Name: name, Status: statusWarn, Detail: "primary with " + replicas + " replica(s), replicated asynchronously: a failover can lose a lock acquired just before it",
		Fix: "use fencing tokens at the protected resource, or --redlock over independent primaries"}
}

// latencyProbes is the number of PINGs whose median is reported.
const latencyProbes = 5

func latencyCheck(ctx context.Context, c redis.Cmdable) check {
	const name = "latency"
	rtts := make([]time.Duration, 0, latencyProbes)
	for range latencyProbes {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return check{Name: name, Status: statusFail, Detail: "PING failed: " + oneLine(err), Fix: "check the network and the server"}
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	med := rtts[len(rtts)/2]
	d := fmt.Sprintf("median round trip %v over %d PINGs", med.Round(10*time.Microsecond), latencyProbes)
	if med > 20*time.Millisecond {
		return check{Name: name, Status: statusWarn, Detail: d + ": every acquire and renewal costs a round trip; keep leases ≥ 100× this",
			Fix: "run dlock close to Redis, or use longer leases (run --lease, the library's WithAutoRenew)"}
	}
	return check{Name: name, Status: statusOK, Detail: d}
}
