package main

import (
	"encoding/json"
	"strings"
	"testing"

	"example.com/dlock/internal/mysqlserver"
)

// On MariaDB's lease table (mysql://, migrated) --shared runs overlap, a
// queued --exclusive keeps a later --shared -n out (75, naming the writer)
// and then runs alone with a fence above the readers', and status shows
// the readers and the queued writer. In session mode (GET_LOCK, which has
// no shared mode and keeps no data with a lock) --shared, --exclusive and
// --permits exit 64 naming the stores that have them. The control: the
// same --shared -n gets in before the writer queued.
func TestRunSharedExclusiveOnMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB")
	}
	srv := mysqlserver.Start(t)
	url := withQuery(srv.URL(), "migrate=true")
	root := t.TempDir()
	r1 := startFamily(t, url, root, "r1", "m", "--shared")
	r1.ready(t)
	r2 := startFamily(t, url, root, "r2", "m", "-s")
	r2.ready(t)
	if r2.others(t) != 1 {
		t.Fatalf("the second --shared command saw %d others inside, want 1", r2.others(t))
	}
	if r := runDlock(t, nil, "run", "--store", url, "--shared", "-n", "m", "--", "true"); r.code != 0 { // control
		t.Fatalf("--shared -n beside readers, no writer queued: want 0: %s", r)
	}
	w := startFamily(t, url, root, "w", "m", "--exclusive", "-v")
	w.waiting(t, `read-write lock "m"`)
	code, out, _ := runCLI(t, "status", "--json", "--store", url, "m")
	var st lockStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.RW == nil || !st.RW.WriterWaiting || len(st.RW.Readers) != 2 {
		t.Fatalf("status while a writer waits: exit %d %s; want two readers and writer_waiting", code, out)
	}
	if r := runDlock(t, nil, "run", "--store", url, "--shared", "-n", "m", "--", "true"); r.code != ExitNotAcquired ||
		!strings.Contains(r.stderr, "a writer queued") {
		t.Fatalf("--shared -n behind a queued writer: want %d naming the writer: %s", ExitNotAcquired, r)
	}
	r1.stop(t)
	r2.stop(t)
	w.ready(t)
	if w.others(t) != 0 || w.fence(t) <= r1.fence(t) || w.fence(t) <= r2.fence(t) {
		t.Fatalf("the writer saw %d others inside, fence %d after the readers' %d, %d", w.others(t), w.fence(t), r1.fence(t), r2.fence(t))
	}
	w.stop(t)
	session := withQuery(srv.URL(), "mode=session")
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--shared"}, "has no read-write lock"},
		{[]string{"--exclusive"}, "has no read-write lock"},
		{[]string{"--permits", "2"}, "has no semaphore"},
	} {
		args := append(append([]string{"run", "--store", session}, c.flags...), "s", "--", "sh", "-c", "echo ran")
		if code, out, stderr := runCLI(t, args...); code != ExitUsage || out != "" || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "mysql://") {
			t.Errorf("%v in session mode: exit %d, stdout %q, stderr %q; want %d, %q naming mysql://", c.flags, code, out, stderr, ExitUsage, c.want)
		}
	}
}
