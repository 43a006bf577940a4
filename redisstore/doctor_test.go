package redisstore_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
)

// doctor runs the store's checks over a client of addr (as user:pw if
// given) and returns them by name.
func doctor(t *testing.T, addr, user, pw string) map[string]driver.Check {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: pw, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	checks := newStore(t, rdb).Doctor(testCtx(t), 30*time.Second)
	m := map[string]driver.Check{}
	for _, c := range checks {
		if _, dup := m[c.Name]; dup {
			t.Errorf("check %q twice", c.Name)
		}
		m[c.Name] = c
	}
	return m
}

func wantCheck(t *testing.T, m map[string]driver.Check, name string, st driver.Status, contains ...string) {
	t.Helper()
	c, ok := m[name]
	if !ok {
		t.Errorf("no check %q in %+v", name, m)
		return
	}
	if c.Status != st {
		t.Errorf("%s: status %d, want %d: %s", name, c.Status, st, c.Detail)
	}
	for _, s := range contains {
		if !strings.Contains(c.Detail, s) {
			t.Errorf("%s: detail lacks %q: %s", name, s, c.Detail)
		}
	}
}

// TestDoctorDefaultConfig: a default redis-server passes with one warning
// (no fsync'd persistence), with its fix; the acl probe leaves nothing that
// outlives a second.
func TestDoctorDefaultConfig(t *testing.T) {
	srv, rdb := newRedis(t)
	m := doctor(t, srv.Addr(), "", "")
	wantCheck(t, m, "version", driver.OK, "redis 7")
	wantCheck(t, m, "maxmemory-policy", driver.OK, "noeviction")
	wantCheck(t, m, "persistence", driver.Warn, "fix: appendonly yes")
	wantCheck(t, m, "replication", driver.OK)
	wantCheck(t, m, "latency", driver.OK, "median")
	wantCheck(t, m, "acl", driver.OK)
	if len(m) != 6 {
		t.Errorf("want 6 checks, got %v", m)
	}
	ctx := testCtx(t)
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > time.Second {
			t.Errorf("doctor left %q with PTTL %v, %v", k, ttl, err)
		}
	}
}

// TestDoctorFailsOnEvictionAndReplica: an evicting policy and a replica
// fail; fsync'd persistence passes; replicas are a warning on the primary.
func TestDoctorFailsOnEvictionAndReplica(t *testing.T) {
	lru := redisserver.Start(t, redisserver.WithArgs("--maxmemory-policy", "allkeys-lru"))
	wantCheck(t, doctor(t, lru.Addr(), "", ""), "maxmemory-policy", driver.Fail, "allkeys-lru", "fix: CONFIG SET maxmemory-policy noeviction")

	primary := redisserver.Start(t, redisserver.WithAOF(true))
	replica := redisserver.Start(t, redisserver.WithArgs("--replicaof", "127.0.0.1", fmt.Sprint(primary.Port())))
	wantCheck(t, doctor(t, primary.Addr(), "", ""), "persistence", driver.OK, "appendfsync always")
	wantCheck(t, doctor(t, replica.Addr(), "", ""), "replication", driver.Fail, "replica")
	deadline := time.Now().Add(20 * time.Second)
	for doctor(t, primary.Addr(), "", "")["replication"].Status != driver.Warn {
		if time.Now().After(deadline) {
			t.Fatal("the primary's replica never showed up as a warning")
		}
		time.Sleep(100 * time.Millisecond) // polling the server's replication state
	}
}

// lockerRules let a user do exactly what the store needs, on its keys and
// channels only.
var lockerRules = []string{"on", ">pw", "resetkeys", "resetchannels", "-@all", "+ping", "+evalsha", "+eval", "+script|load",
	"+subscribe", "+unsubscribe", "+publish", "+set", "+pexpire", "+pttl",
	"+get", "+time", "+pubsub|numsub", "+scan", "~dlock:*", "&dlock:*"}

func setUser(t *testing.T, srv *redisserver.Server, name string, rules ...string) {
	t.Helper()
	if _, err := srv.Do(append([]string{"ACL", "SETUSER", name}, rules...)...); err != nil {
		t.Fatal(err)
	}
}

// TestDoctorACL: a restricted user passes the acl check, sees "cannot
// check" where INFO and CONFIG are forbidden, and (negative control) is
// told which commands it lacks, by trying them or by ACL DRYRUN.
func TestDoctorACL(t *testing.T) {
	srv := redisserver.Start(t)
	setUser(t, srv, "locker", lockerRules...)
	m := doctor(t, srv.Addr(), "locker", "pw")
	wantCheck(t, m, "acl", driver.OK)
	wantCheck(t, m, "maxmemory-policy", driver.Warn, "cannot check")

	setUser(t, srv, "locker", "-publish", "-time")
	wantCheck(t, doctor(t, srv.Addr(), "locker", "pw"), "acl", driver.Warn, "PUBLISH", "TIME", "trying", "fix: ACL SETUSER locker")

	setUser(t, srv, "asker", append(lockerRules, "+acl|whoami", "+acl|dryrun", "-set")...)
	wantCheck(t, doctor(t, srv.Addr(), "asker", "pw"), "acl", driver.Warn, "may not run SET (", "DRYRUN")
}

// TestDoctorUnreachable: a server that refuses connections gets one Fail,
// "connection", and no other check.
func TestDoctorUnreachable(t *testing.T) {
	m := doctor(t, closedAddr(t), "", "")
	if len(m) != 1 {
		t.Fatalf("want one check, got %v", m)
	}
	wantCheck(t, m, "connection", driver.Fail, "does not answer")
}

// TestDoctorCluster: the cluster's state once, and every primary's checks
// named by its address.
func TestDoctorCluster(t *testing.T) {
	c, rdb := newCluster(t)
	checks := newStore(t, rdb).Doctor(testCtx(t), 30*time.Second)
	m := map[string]driver.Check{}
	for _, ch := range checks {
		m[ch.Name] = ch
	}
	wantCheck(t, m, "cluster", driver.OK, "cluster_state ok")
	wantCheck(t, m, "acl", driver.OK)
	for _, n := range c.Nodes() {
		wantCheck(t, m, n.Addr()+"/version", driver.OK)
		wantCheck(t, m, n.Addr()+"/maxmemory-policy", driver.OK)
	}
	if want := 2 + 5*len(c.Nodes()); len(checks) != want {
		t.Errorf("want %d checks, got %d: %v", want, len(checks), m)
	}
}

// TestDoctorSentinel: through redis+sentinel:// the Sentinels are asked
// too: all answering and agreeing is OK; a listed Sentinel that does not
// answer is a warning (negative control).
func TestDoctorSentinel(t *testing.T) {
	sn := redisserver.StartSentinel(t)
	addrs := sn.SentinelAddrs()
	byName := func(rawURL string) map[string]driver.Check {
		m := map[string]driver.Check{}
		for _, c := range openURL(t, rawURL).Store.(driver.Doctor).Doctor(testCtx(t), 30*time.Second) {
			m[c.Name] = c
		}
		return m
	}
	m := byName("redis+sentinel://" + strings.Join(addrs, ",") + "/" + sn.MasterName())
	wantCheck(t, m, "sentinel", driver.OK, "3 of 3", sn.Primary().Addr())
	wantCheck(t, m, "replication", driver.Warn, "1 replica")

	m = byName("redis+sentinel://" + addrs[0] + "," + addrs[1] + "," + closedAddr(t) + "/" + sn.MasterName())
	wantCheck(t, m, "sentinel", driver.Warn, "2 of 3", "no answer from")
}

func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// fairRules add what the fair store's scripts need to lockerRules.
var fairRules = []string{"+zadd", "+zrem", "+zrange", "+zrangebyscore", "+zremrangebyscore", "+zcount",
	"+rpush", "+lrem", "+lindex", "+pexpireat", "+exists"}

// TestFairDoctorACL: the fair store's acl check also asks for the commands
// of its queue (sorted set and list), by trying them or by ACL DRYRUN; a
// user with the default store's rules alone is told what it lacks (the
// control: the default store's check passes that user).
func TestFairDoctorACL(t *testing.T) {
	srv := redisserver.Start(t)
	setUser(t, srv, "locker", lockerRules...)
	fairDoctor := func(user string) map[string]driver.Check {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: "pw", MaxRetries: -1, DialTimeout: time.Second})
		t.Cleanup(func() { _ = rdb.Close() })
		m := map[string]driver.Check{}
		for _, c := range newFairStore(t, rdb, nil).Doctor(testCtx(t), 30*time.Second) {
			m[c.Name] = c
		}
		return m
	}
	wantCheck(t, doctor(t, srv.Addr(), "locker", "pw"), "acl", driver.OK)
	wantCheck(t, fairDoctor("locker"), "acl", driver.Warn, "ZADD", "RPUSH", "trying", "+zadd")

	setUser(t, srv, "locker", fairRules...)
	wantCheck(t, fairDoctor("locker"), "acl", driver.OK)

	setUser(t, srv, "asker", append(append(lockerRules, fairRules...), "+acl|whoami", "+acl|dryrun", "-rpush")...)
	wantCheck(t, fairDoctor("asker"), "acl", driver.Warn, "may not run RPUSH (", "DRYRUN")
}
