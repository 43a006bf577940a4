package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

func doctorJSON(t *testing.T, env []string, url string) (doctorReport, result) {
	t.Helper()
	r := runDlock(t, env, "doctor", "--json", "--redis", url)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v: %s", err, r)
	}
	return rep, r
}

// statusOf returns the status and detail of check name in a report.
func statusOf(t *testing.T, rep doctorReport, name string) (string, string) {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c.Status, c.Detail
		}
	}
	t.Fatalf("no check %q in %+v", name, rep)
	return "", ""
}

func TestDoctorDefaultConfigPassesWithWarnings(t *testing.T) {
	srv := redisserver.Start(t)
	r := runDlock(t, nil, "doctor", "--redis", srv.URL())
	if r.code != 0 {
		t.Fatalf("want exit 0: %s", r)
	}
	for _, want := range []string{"model: TTL 10ms or more,", "granularity 1ms; expiry on the server's clock; per-key leases",
		"OK    probe acquire", "OK    probe extend", "OK    probe release", "OK    probe inspect",
		"OK    version", "OK    maxmemory-policy", "WARN  persistence", "fix: appendonly yes", "OK    replication", "OK    latency", "OK    acl", "no unsafe setting"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestDoctorFailsOnEvictionPolicy(t *testing.T) {
	srv := redisserver.Start(t, redisserver.WithArgs("--maxmemory-policy", "allkeys-lru"))
	rep, r := doctorJSON(t, nil, srv.URL())
	if r.code != ExitUnsafe || rep.Safe {
		t.Fatalf("want exit %d and safe=false: %s", ExitUnsafe, r)
	}
	if st, d := statusOf(t, rep, "maxmemory-policy"); st != statusFail || !strings.Contains(d, "allkeys-lru") {
		t.Fatalf("maxmemory-policy: %s %s", st, d)
	}
	r = runDlock(t, nil, "doctor", "--redis", srv.URL())
	if r.code != ExitUnsafe || !strings.Contains(r.stdout, "FAIL  maxmemory-policy") || !strings.Contains(r.stdout, "noeviction") {
		t.Fatalf("text output: %s", r)
	}
}

func TestDoctorPersistenceAndReplication(t *testing.T) {
	primary := redisserver.Start(t, redisserver.WithAOF(true))
	replica := redisserver.Start(t, redisserver.WithArgs("--replicaof", "127.0.0.1", itoa(primary.Port())))
	rep, r := doctorJSON(t, nil, primary.URL())
	if st, d := statusOf(t, rep, "persistence"); st != statusOK {
		t.Errorf("persistence with appendfsync always: %s %s", st, d)
	}
	testkit.WaitFor(t, 20*time.Second, "the replica to connect", func() bool {
		rep, r = doctorJSON(t, nil, primary.URL())
		st, _ := statusOf(t, rep, "replication")
		return st == statusWarn
	})
	if r.code != 0 {
		t.Errorf("replicas are a warning, not a failure: %s", r)
	}
	rep, r = doctorJSON(t, nil, replica.URL())
	if st, d := statusOf(t, rep, "replication"); st != statusFail || r.code != ExitUnsafe {
		t.Errorf("pointed at a replica: %s %s, exit %d", st, d, r.code)
	}
}

// lockerRules are the ACL rules of a user that may do exactly what dlock
// needs, on dlock's keys and channels only: no DEL or INCR, which the
// scripts no longer call.
var lockerRules = []string{"on", ">pw", "resetkeys", "resetchannels", "-@all", "+ping", "+evalsha", "+eval", "+script|load",
	"+subscribe", "+unsubscribe", "+publish", "+set", "+pexpire", "+pttl",
	"+get", "+time", "+pubsub|numsub", "+scan", "~dlock:*", "&dlock:*"}

func setUser(t *testing.T, srv *redisserver.Server, name string, rules ...string) {
	t.Helper()
	if _, err := srv.Do(append([]string{"ACL", "SETUSER", name}, rules...)...); err != nil {
		t.Fatal(err)
	}
}

func TestACLRestrictedUser(t *testing.T) {
	srv := redisserver.Start(t)
	setUser(t, srv, "locker", lockerRules...)
	url := "redis://locker:pw@" + srv.Addr()

	dir := t.TempDir()
	r := runDlock(t, []string{"D=" + dir}, "run", "--redis", url, "--key", "acl", "--", "sh", "-c", `echo "$DLOCK_FENCE" > "$D/fence"`)
	if f, err := strconv.ParseUint(readFile(t, dir+"/fence"), 10, 64); r.code != 0 || err != nil || f == 0 {
		t.Fatalf("dlock run as a restricted user: %s", r)
	}
	if r := runDlock(t, nil, "status", "--redis", url, "acl"); r.code != 0 || !strings.Contains(r.stdout, "held:     no") {
		t.Fatalf("status as a restricted user: %s", r)
	}

	// The user may not run INFO or CONFIG: those checks say so, without failing.
	rep, r := doctorJSON(t, nil, url)
	if r.code != 0 {
		t.Fatalf("doctor as a restricted user: %s", r)
	}
	if st, d := statusOf(t, rep, "acl"); st != statusOK {
		t.Fatalf("acl: %s %s", st, d)
	}
	if st, d := statusOf(t, rep, "maxmemory-policy"); st != statusWarn || !strings.Contains(d, "cannot check") {
		t.Fatalf("maxmemory-policy without INFO/CONFIG: %s %s", st, d)
	}

	// Negative control: take PUBLISH and TIME away and the doctor must name
	// both (and the rules that give them back).
	setUser(t, srv, "locker", "-publish", "-time")
	rep, _ = doctorJSON(t, nil, url)
	if st, d := statusOf(t, rep, "acl"); st != statusWarn || !strings.Contains(d, "PUBLISH") || !strings.Contains(d, "TIME") || !strings.Contains(d, "trying") {
		t.Fatalf("acl without PUBLISH and TIME: %s %s", st, d)
	}

	// The same through ACL DRYRUN, for a user allowed to ask.
	setUser(t, srv, "asker", append(lockerRules, "+acl|whoami", "+acl|dryrun", "-set")...)
	rep, _ = doctorJSON(t, nil, "redis://asker:pw@"+srv.Addr())
	if st, d := statusOf(t, rep, "acl"); st != statusWarn || !strings.Contains(d, "may not run SET (") || !strings.Contains(d, "DRYRUN") {
		t.Fatalf("acl without SET, by DRYRUN: %s %s", st, d)
	}
	setUser(t, srv, "asker", "+set", "-time")
	rep, _ = doctorJSON(t, nil, "redis://asker:pw@"+srv.Addr())
	if st, d := statusOf(t, rep, "acl"); st != statusWarn || !strings.Contains(d, "may not run TIME (") || !strings.Contains(d, "DRYRUN") {
		t.Fatalf("acl without TIME, by DRYRUN: %s %s", st, d)
	}
}

// The model line says what a store's TTL bounds mean: a session store
// (no minimum, no maximum: the session keeps the lock) takes any TTL; a
// per-key store says its bounds.
func TestDoctorModelLine(t *testing.T) {
	for _, c := range []struct {
		m    modelReport
		want string
	}{
		{modelReport{MinTTL: "0s", MaxTTL: "none", Granularity: "1s", ServerClock: true, Session: true, SessionTTL: "10s"}, "model: any TTL, granularity 1s; expiry on the server's clock; one session per client (session TTL 10s)"},
		{modelReport{MinTTL: "10ms", MaxTTL: "none", Granularity: "1ms", ServerClock: true}, "model: TTL 10ms or more, granularity 1ms;"},
		{modelReport{MinTTL: "1ms", MaxTTL: "24h0m0s", Granularity: "1µs"}, "model: TTL 1ms to 24h0m0s, granularity 1µs; expiry on client clocks (they must run at similar rates); per-key leases"},
		{modelReport{MinTTL: "0s", MaxTTL: "none", Granularity: "0s", ServerClock: true, Session: true, SessionTTL: "5s"}, "model: any TTL; expiry on the server's clock; one session per client (session TTL 5s)"},
	} {
		var b strings.Builder
		printDoctor(&b, doctorReport{Target: "x", Model: c.m, Safe: true})
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%+v: printed %q, want %q", c.m, b.String(), c.want)
		}
	}
}

// The check lines keep one column for the details, also when a check's
// name is longer than the usual width ("clock and time zone").
func TestDoctorColumnsAlign(t *testing.T) {
	var b strings.Builder
	printDoctor(&b, doctorReport{Target: "x", Safe: true, Checks: []check{
		{Name: "ping", Status: statusOK, Detail: "DETAIL-A"},
		{Name: "clock and time zone", Status: statusWarn, Detail: "DETAIL-B", Fix: "FIX-B"},
	}})
	col := func(s string) int {
		for _, l := range strings.Split(b.String(), "\n") {
			if i := strings.Index(l, s); i >= 0 {
				return i
			}
		}
		t.Fatalf("no %s in %q", s, b.String())
		return -1
	}
	if a, d, f := col("DETAIL-A"), col("DETAIL-B"), col("fix: FIX-B"); a != d || f != d {
		t.Errorf("details at columns %d and %d, fix at %d; want one column:\n%s", a, d, f, b.String())
	}
}
