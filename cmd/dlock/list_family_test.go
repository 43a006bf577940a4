package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
)

// list --kind rwlock and --kind semaphore on Redis: the read-write locks in
// use (readers, the writer, a queued writer) and the semaphores with
// permits out (used of N), each holding with its holder, fence and lease,
// matching the pattern; the JSON fields are docs/cli.md's. The default
// kind lists the mutex alone (the control: the same keys are not locks).
func TestListKindShowsRWLocksAndSemaphores(t *testing.T) {
	srv := redisserver.Start(t)
	ctx := t.Context()
	o, err := driver.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	rw, _ := driver.As[driver.RWMutex](o.Store)
	sem, _ := driver.As[driver.Semaphore](o.Store)
	l, err := dlock.NewRWLocks(rw, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	s, err := dlock.NewSemaphores(sem, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()); _ = s.Close(context.Background()) })
	var fences []uint64
	for _, k := range []string{"rep:a", "rep:a", "other"} {
		h, err := l.RLock(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, h.Fence())
	}
	if _, err := l.TryLock(ctx, "rep:a"); err == nil {
		t.Fatal("a writer got in beside readers")
	}
	w, err := l.Lock(ctx, "rep:b")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Acquire(ctx, "rep:pool", 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	docs := jsonDocs(t)
	code, out, stderr := runCLI(t, "list", "--json", "--kind", "rwlock", "--store", srv.URL(), "rep:*")
	checkJSON(t, docs["list --kind rwlock"], out)
	var rows []familyRow
	_ = json.Unmarshal([]byte(out), &rows)
	if code != 0 || len(rows) != 2 || rows[0].Key != "rep:a" || rows[1].Key != "rep:b" {
		t.Fatalf("list --kind rwlock: exit %d %s %s", code, out, stderr)
	}
	a, b := rows[0].RW, rows[1].RW
	if len(a.Readers) != 2 || a.Readers[0].Fence != fences[0] || a.Readers[1].Fence != fences[1] || !a.WriterWaiting ||
		b.Writer == nil || b.Writer.Fence != w.Fence() || b.Writer.TTLms <= 0 {
		t.Fatalf("list --kind rwlock rows: %s", out)
	}
	code, out, _ = runCLI(t, "list", "--kind", "rwlock", "--store", srv.URL(), "rep:*")
	for _, want := range []string{"WRITER QUEUED", "rep:a  read", "rep:b  write"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("list --kind rwlock text lacks %q: %s", want, out)
		}
	}
	code, out, _ = runCLI(t, "list", "--json", "--kind", "semaphore", "--store", srv.URL(), "rep:*")
	checkJSON(t, docs["list --kind semaphore"], out)
	rows = nil
	_ = json.Unmarshal([]byte(out), &rows)
	if code != 0 || len(rows) != 1 || rows[0].Sem.Used != 1 || rows[0].Sem.Limit != 4 || rows[0].Sem.Holders[0].Fence != p.Fence() {
		t.Fatalf("list --kind semaphore: exit %d %s", code, out)
	}
	if code, out, _ = runCLI(t, "list", "--kind", "semaphore", "--store", srv.URL(), "rep:*"); code != 0 || !strings.Contains(out, "rep:pool  1/4") {
		t.Errorf("list --kind semaphore text: %s", out)
	}
	if code, out, _ = runCLI(t, "list", "--json", "--store", srv.URL(), "rep:*"); code != 0 || strings.TrimSpace(out) != "[]" { // control
		t.Errorf("list (the locks) of keys used only as read-write locks and semaphores: exit %d %s, want []", code, out)
	}
}

// --kind other than mutex, rwlock or semaphore is a usage error before any
// I/O (a closed port would be 69); a store without the lister (mem://leaky)
// exits 64 naming status as the way to see one key.
func TestListKindUsage(t *testing.T) {
	if code, _, stderr := runCLI(t, "list", "--kind", "rw", "--store", "redis://127.0.0.1:1"); code != ExitUsage || !strings.Contains(stderr, "want mutex, rwlock or semaphore") {
		t.Errorf("--kind rw: exit %d %q", code, stderr)
	}
	for _, kind := range []string{"rwlock", "semaphore"} {
		if code, _, stderr := runCLI(t, "list", "--kind", kind, "--store", "mem://leaky"); code != ExitUsage || !strings.Contains(stderr, "use dlock status KEY") {
			t.Errorf("--kind %s on a store without the lister: exit %d %q", kind, code, stderr)
		}
	}
}
