package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// memFamily opens mem://full's read-write locks and semaphores, whose
// holdings `dlock status --store mem://full` then sees.
func memFamily(t *testing.T) (*dlock.RWLocks, *dlock.Semaphores) {
	t.Helper()
	o, err := driver.Open(t.Context(), "mem://full")
	if err != nil {
		t.Fatal(err)
	}
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
	return l, s
}

// status --json shows the read-write lock (readers by fence, the writer,
// the queued writer) and the semaphore (used of N, holders by fence) of
// the key, each holding with its holder's token prefix (never the whole),
// fence and remaining lease; every field is documented in docs/cli.md.
// The text shows them only while in use: a free key prints as before.
func TestStatusShowsRWLockAndSemaphore(t *testing.T) {
	docs := jsonDocs(t)
	l, s := memFamily(t)
	ctx := t.Context()
	r1, err := l.RLock(ctx, "fam:st")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.RLock(ctx, "fam:st")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "fam:st"); err == nil { // leaves the writer-waiting mark
		t.Fatal("a writer got in beside two readers")
	}
	p, err := s.Acquire(ctx, "fam:st", 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "status", "--json", "--store", "mem://full", "fam:st")
	seen := checkJSON(t, docs["status"], out)
	var st lockStatus
	_ = json.Unmarshal([]byte(out), &st)
	if code != 0 || st.RW == nil || st.RW.Mode != "read" || len(st.RW.Readers) != 2 || !st.RW.WriterWaiting || st.RW.WriterWaitingMs <= 0 ||
		st.RW.Readers[0].Fence != r1.Fence() || st.RW.Readers[1].Fence != r2.Fence() || st.RW.Readers[0].TTLms <= 0 {
		t.Fatalf("status --json with two readers and a queued writer: exit %d %s %s", code, out, stderr)
	}
	if st.Sem == nil || st.Sem.Used != 2 || st.Sem.Limit != 3 || len(st.Sem.Holders) != 1 || st.Sem.Holders[0].Fence != p.Fence() ||
		st.Sem.Holders[0].Permits != 2 || !seen["semaphore.holders[].holder"] || strings.Contains(out, "…") {
		t.Fatalf("status --json with 2 of 3 permits out: %s", out)
	}
	code, out, _ = runCLI(t, "status", "--store", "mem://full", "fam:st")
	for _, want := range []string{"rwlock:   held by 2 readers; a writer is queued", "  reader   ", "permits:  2 of 3 used", "2 permits  fence"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status text lacks %q: %s", want, out)
		}
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := l.Lock(ctx, "fam:st")
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ = runCLI(t, "status", "--json", "--store", "mem://full", "fam:st")
	seen = checkJSON(t, docs["status"], out)
	_ = json.Unmarshal([]byte(out), &st)
	if st.RW.Mode != "write" || st.RW.Writer == nil || st.RW.Writer.Fence != w.Fence() || len(st.RW.Readers) != 0 || !seen["rwlock.writer.ttl_ms"] {
		t.Fatalf("status --json with a writer: %s", out)
	}
	_ = w.Release(ctx)
	_ = p.Release(ctx)
	code, out, _ = runCLI(t, "status", "--store", "mem://full", "fam:free") // free: as before
	if code != 0 || strings.Contains(out, "rwlock") || strings.Contains(out, "permits") {
		t.Errorf("status of a free key shows the family: %s", out)
	}
	_, out, _ = runCLI(t, "status", "--json", "--store", "mem://full", "fam:free")
	if seen := checkJSON(t, docs["status"], out); !seen["rwlock.mode"] || !seen["semaphore.used"] || seen["rwlock.writer"] || !strings.Contains(out, `"mode": "none"`) {
		t.Errorf("status --json of a free key: want rwlock and semaphore, free: %s", out)
	}
}

// A store that can inspect locks but not read-write locks or semaphores
// (mem://leaky hides memstore's other capabilities) gives no rwlock or
// semaphore in status --json, and exits 0 as before.
func TestStatusWithoutFamilyInspectors(t *testing.T) {
	code, out, stderr := runCLI(t, "status", "--json", "--store", "mem://leaky", "fam:bare")
	if code != 0 || strings.Contains(out, "rwlock") || strings.Contains(out, "semaphore") {
		t.Fatalf("status --json on mem://leaky: exit %d %s %s", code, out, stderr)
	}
	code, out, _ = runCLI(t, "status", "--json", "--store", "mem://full", "fam:bare") // control
	if code != 0 || !strings.Contains(out, `"rwlock"`) {
		t.Fatalf("status --json on mem://full: exit %d %s", code, out)
	}
}
