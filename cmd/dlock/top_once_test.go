package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// topKeys are the keys of the rows of a text frame of top, in order,
// keeping those in want only.
func topKeys(t *testing.T, out string, want ...string) []string {
	t.Helper()
	_, table, ok := strings.Cut(out, "\nKEY ")
	if !ok {
		t.Fatalf("no table in %q", out)
	}
	var keys []string
	for _, line := range strings.Split(table, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 && slices.Contains(want, f[0]) {
			keys = append(keys, f[0])
		}
	}
	return keys
}

// topClient is a dlock client on the store at url with ttl and meta.
func topClient(t *testing.T, o *driver.Opened, ttl time.Duration, meta string) *dlock.Client {
	t.Helper()
	c, err := dlock.New(o.Store.(driver.Mutex), dlock.WithTTL(ttl), dlock.WithMeta(meta))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// top --once on Redis: every lock, read-write holding and semaphore
// holding that matches, with holder, metadata, TTL, fence and waiters, in
// the order --sort asks. The four orders of the three locks differ by
// construction (TTL b<a<c; fence b>c>a, Redis's fences growing with the
// time taken; waiters c>a=b), so a --sort that changes nothing fails.
func TestTopOnceRowsAndSortOrder(t *testing.T) {
	srv := redisserver.Start(t)
	ctx := t.Context()
	o, err := driver.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	long, short := topClient(t, o, time.Minute, "host=a"), topClient(t, o, 20*time.Second, "")
	if _, err := long.TryLock(ctx, "top:a"); err != nil {
		t.Fatal(err)
	}
	if _, err := long.TryLock(ctx, "top:c"); err != nil {
		t.Fatal(err)
	}
	if _, err := short.TryLock(ctx, "top:b"); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = short.Lock(waitCtx, "top:c") }()
	rw, _ := driver.As[driver.RWMutex](o.Store)
	sem, _ := driver.As[driver.Semaphore](o.Store)
	rl, _ := dlock.NewRWLocks(rw, dlock.WithTTL(time.Minute))
	sl, _ := dlock.NewSemaphores(sem, dlock.WithTTL(time.Minute))
	t.Cleanup(func() { _ = rl.Close(context.Background()); _ = sl.Close(context.Background()) })
	if _, err := rl.RLock(ctx, "top:rw"); err != nil {
		t.Fatal(err)
	}
	if _, err := sl.Acquire(ctx, "top:sem", 5, 2); err != nil {
		t.Fatal(err)
	}

	var f topFrame
	testkit.WaitFor(t, 10*time.Second, "top to show the waiter on top:c", func() bool {
		code, out, stderr := runCLI(t, "top", "--once", "--json", "--store", srv.URL(), "top:*")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		f = topFrame{}
		if err := json.Unmarshal([]byte(out), &f); err != nil {
			t.Fatal(err)
		}
		return len(f.Locks) == 3 && f.Locks[2].Waiters != nil && *f.Locks[2].Waiters == 1
	})
	if len(f.RWLocks) != 1 || len(f.Semaphores) != 1 || len(f.Unsupported) != 0 || f.Locks[0].Meta != "host=a" || f.Locks[2].Fence <= f.Locks[0].Fence {
		t.Fatalf("frame: %+v", f)
	}

	code, out, stderr := runCLI(t, "top", "--once", "--store", srv.URL(), "top:*")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"dlock top top:*", "3 locks, 1 read-write lock, 1 semaphore", "host=a", "rwlock read", "semaphore 2/5 ×2"} {
		if !strings.Contains(out, want) {
			t.Errorf("top --once lacks %q:\n%s", want, out)
		}
	}
	all := []string{"top:a", "top:b", "top:c", "top:rw", "top:sem"}
	if got := topKeys(t, out, all...); !slices.Equal(got, all) {
		t.Errorf("rows %v, want %v:\n%s", got, all, out)
	}
	for sortBy, want := range map[string][]string{
		"key":     {"top:a", "top:b", "top:c"},
		"ttl":     {"top:b", "top:a", "top:c"},
		"fence":   {"top:b", "top:c", "top:a"},
		"waiters": {"top:c", "top:a", "top:b"},
	} {
		code, out, _ := runCLI(t, "top", "--once", "--sort", sortBy, "--store", srv.URL(), "top:?")
		if got := topKeys(t, out, "top:a", "top:b", "top:c"); code != 0 || !slices.Equal(got, want) {
			t.Errorf("--sort %s: exit %d, rows %v, want %v:\n%s", sortBy, code, got, want, out)
		}
		code, out, _ = runCLI(t, "top", "--once", "--json", "--sort", sortBy, "--store", srv.URL(), "top:?")
		f = topFrame{}
		_ = json.Unmarshal([]byte(out), &f)
		var got []string
		for _, l := range f.Locks {
			got = append(got, l.Key)
		}
		if code != 0 || !slices.Equal(got, want) {
			t.Errorf("--json --sort %s: exit %d, locks %v, want %v", sortBy, code, got, want)
		}
	}
}

// top --once --json matches docs/cli.md's table, on Redis (every part) and
// on the in-process memstore, which cannot list read-write locks or
// semaphores and says so.
func TestTopJSONMatchesDocs(t *testing.T) {
	docs := jsonDocs(t)
	srv := redisserver.Start(t)
	o, err := driver.Open(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	if _, err := topClient(t, o, time.Minute, "pid=1").TryLock(t.Context(), "tj:a"); err != nil {
		t.Fatal(err)
	}
	sem, _ := driver.As[driver.Semaphore](o.Store)
	sl, _ := dlock.NewSemaphores(sem, dlock.WithTTL(time.Minute))
	t.Cleanup(func() { _ = sl.Close(context.Background()) })
	if _, err := sl.Acquire(t.Context(), "tj:s", 3, 1); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "top", "--once", "--json", "--store", srv.URL(), "tj:*")
	seen := checkJSON(t, docs["top"], out)
	if code != 0 || !seen["locks[].waiters"] || !seen["locks[].meta"] || !seen["semaphores[].semaphore.holders[].permits"] {
		t.Errorf("redis: exit %d, fields %v: %s", code, seen, out)
	}

	holdMem(t, "tj:mem")
	code, out, _ = runCLI(t, "top", "--once", "--json", "--store", "mem://full", "tj:*")
	checkJSON(t, docs["top"], out)
	var f topFrame
	_ = json.Unmarshal([]byte(out), &f)
	if code != 0 || len(f.Locks) != 1 || !slices.Equal(f.Unsupported, []string{kindRWLock, kindSemaphore}) {
		t.Errorf("mem://full: exit %d: %s", code, out)
	}
	code, out, _ = runCLI(t, "top", "--once", "--store", "mem://full", "tj:*")
	if code != 0 || !strings.Contains(out, "this store cannot list read-write locks or semaphores") || !strings.Contains(out, "tj:mem") {
		t.Errorf("mem://full text: exit %d:\n%s", code, out)
	}
}
