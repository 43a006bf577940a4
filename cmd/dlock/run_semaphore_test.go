package main

import (
	"encoding/json"
	"strings"
	"testing"

	"example.com/dlock/internal/redisserver"
)

// --permits 2: two runs hold a permit each at once (the second's command
// sees the first's inside); a third waits (it says so with -v, its command
// does not start, and a third -n is refused with 75) until one of them
// ends. status --json shows 2 of 2 used with each holder's fence (the
// DLOCK_FENCE its command got). The control: with one permit out, a -n run
// gets in, so the refusal is the limit's doing.
func TestRunPermitsAdmitsNAndQueuesTheNext(t *testing.T) {
	srv := redisserver.Start(t)
	root := t.TempDir()
	p1 := startFamily(t, srv.URL(), root, "p1", "pool", "--permits", "2")
	p1.ready(t)
	if r := runDlock(t, nil, "run", "--store", srv.URL(), "--permits", "2", "-n", "pool", "--", "true"); r.code != 0 { // control
		t.Fatalf("--permits 2 -n with one permit out: want 0: %s", r)
	}
	p2 := startFamily(t, srv.URL(), root, "p2", "pool", "--permits", "2")
	p2.ready(t)
	if p2.others(t) != 1 {
		t.Fatalf("the second permit's command saw %d others inside, want 1", p2.others(t))
	}
	code, out, _ := runCLI(t, "status", "--json", "--store", srv.URL(), "pool")
	var st lockStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Sem == nil || st.Sem.Used != 2 || st.Sem.Limit != 2 ||
		len(st.Sem.Holders) != 2 || st.Sem.Holders[0].Fence != p1.fence(t) || st.Sem.Holders[1].Fence != p2.fence(t) {
		t.Fatalf("status --json: exit %d %s; want 2 of 2 permits used, fences %d and %d", code, out, p1.fence(t), p2.fence(t))
	}
	if code, out, _ := runCLI(t, "status", "--store", srv.URL(), "pool"); code != 0 || !strings.Contains(out, "permits:  2 of 2 used") {
		t.Errorf("status: exit %d %s", code, out)
	}
	r := runDlock(t, nil, "run", "--store", srv.URL(), "--permits", "2", "-n", "pool", "--", "true")
	if r.code != ExitNotAcquired || !strings.Contains(r.stderr, `semaphore "pool" (1 of 2 permits) not acquired`) || !strings.Contains(r.stderr, "2 of 2 permits out") {
		t.Fatalf("a third -n: want %d naming the permits out: %s", ExitNotAcquired, r)
	}
	p3 := startFamily(t, srv.URL(), root, "p3", "pool", "--permits", "2", "-v")
	p3.waiting(t, `semaphore "pool": 2 of 2 permits out`)
	if p3.running(t) {
		t.Fatal("a third permit's command started while two were out")
	}
	p1.stop(t)
	p3.ready(t)
	if p3.others(t) != 1 || p3.fence(t) <= p2.fence(t) {
		t.Errorf("third permit: %d others inside (want 1), fence %d (want above %d)", p3.others(t), p3.fence(t), p2.fence(t))
	}
	p2.stop(t)
	p3.stop(t)
}

// A --permits N other than the N stored with the key while permits are
// out is a usage error (64) that names the stored N; nothing runs.
func TestRunPermitsOtherLimitIsUsageError(t *testing.T) {
	srv := redisserver.Start(t)
	root := t.TempDir()
	p := startFamily(t, srv.URL(), root, "p", "lim", "--permits", "2")
	p.ready(t)
	r := runDlock(t, nil, "run", "--store", srv.URL(), "--permits", "3", "lim", "--", "sh", "-c", "echo ran")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "use --permits 2") || strings.Contains(r.stdout, "ran") {
		t.Fatalf("--permits 3 on a semaphore of 2: want %d naming 2, nothing run: %s", ExitUsage, r)
	}
	p.stop(t)
}
