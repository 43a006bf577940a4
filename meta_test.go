package dlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// inspectMeta returns the metadata Inspect reports for key on fs's store.
func inspectMeta(t *testing.T, fs *faultStore, key string) driver.Info {
	t.Helper()
	info, err := fs.Mutex.(driver.Inspector).Inspect(testCtx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestMetaIsKeptWithTheHoldingAndShownByInspect(t *testing.T) {
	fs := &faultStore{Mutex: memstore.New(nil)}
	c, err := dlock.New(unwrapStore{fs}, dlock.WithMeta("host=a pid=1"))
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, c)
	ctx := testCtx(t)

	l := mustLock(t, c, testCtx(t), "k")
	if info := inspectMeta(t, fs, "k"); info.Meta != "host=a pid=1" || !info.Held {
		t.Fatalf("Inspect = %+v, want the client's metadata", info)
	}
	if strings.Contains(inspectMeta(t, fs, "k").Meta, fs.lastToken) {
		t.Fatal("metadata contains the token")
	}
	release(t, l)
	if info := inspectMeta(t, fs, "k"); info.Meta != "" {
		t.Fatalf("free key: Meta = %q, want none", info.Meta)
	}

	// A call's option overrides the client's; WithMeta("") records none.
	l = mustLock(t, c, testCtx(t), "k", dlock.WithMeta("job=nightly"))
	if got := inspectMeta(t, fs, "k").Meta; got != "job=nightly" {
		t.Fatalf("Meta = %q, want the call's", got)
	}
	release(t, l)
	l = mustLock(t, c, testCtx(t), "k", dlock.WithMeta(""))
	if got := inspectMeta(t, fs, "k").Meta; got != "" {
		t.Fatalf("Meta = %q, want none", got)
	}
	release(t, l)

	// A re-entry keeps the metadata the holding started with.
	octx := dlock.ContextWithOwner(ctx, dlock.NewOwner())
	l1, err := c.Lock(octx, "r", dlock.WithMeta("first"))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := c.Lock(octx, "r", dlock.WithMeta("second"))
	if err != nil {
		t.Fatal(err)
	}
	if got := inspectMeta(t, fs, "r").Meta; got != "first" {
		t.Fatalf("after a re-entry Meta = %q, want %q", got, "first")
	}
	release(t, l2)
	release(t, l1)
}

// A store that does not keep metadata is not given any: faultStore hides the
// memstore's driver.MetaKeeper, unwrapStore (the control) lets it through.
func TestMetaReachesOnlyStoresThatKeepIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*faultStore) driver.Mutex
		want string
	}{
		{"hidden", func(fs *faultStore) driver.Mutex { return fs }, ""},
		{"keeper", func(fs *faultStore) driver.Mutex { return unwrapStore{fs} }, "m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &faultStore{Mutex: memstore.New(nil)}
			c, err := dlock.New(tc.wrap(fs), dlock.WithMeta("m"))
			if err != nil {
				t.Fatal(err)
			}
			closeOnCleanup(t, c)
			release(t, mustLock(t, c, testCtx(t), "k"))
			fs.mu.Lock()
			defer fs.mu.Unlock()
			if fs.lastMeta != tc.want {
				t.Fatalf("Acquire's ctx carried %q, want %q", fs.lastMeta, tc.want)
			}
		})
	}
}

func TestMetaOutOfBoundsIsRefusedBeforeIO(t *testing.T) {
	bad := map[string]string{
		"too long": strings.Repeat("x", driver.MaxMetaLen+1),
		"newline":  "host=a\npid=1",
		"not utf8": "host=\xff",
	}
	for name, meta := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := dlock.New(memstore.New(nil), dlock.WithMeta(meta)); !errors.Is(err, dlock.ErrInvalid) {
				t.Fatalf("New: err = %v, want ErrInvalid", err)
			}
			c, fs := newClient(t)
			if _, err := c.Lock(testCtx(t), "k", dlock.WithMeta(meta)); !errors.Is(err, dlock.ErrInvalid) {
				t.Fatalf("Lock: err = %v, want ErrInvalid", err)
			}
			if n := fs.calls.Load(); n != 0 {
				t.Fatalf("%d store calls, want none", n)
			}
		})
	}
	// The bound itself is accepted.
	c, _ := newClient(t)
	release(t, mustLock(t, c, testCtx(t), "k", dlock.WithMeta(strings.Repeat("x", driver.MaxMetaLen))))
}

// A transfer (the Client's local handoff) keeps the metadata on memstore.
func TestMetaIsKeptByATransferOnMemstore(t *testing.T) {
	s := memstore.New(nil)
	ctx := testCtx(t)
	if _, err := s.Acquire(driver.WithMeta(ctx, "m"), "t", "from", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(ctx, "t", "from", "to", time.Minute); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Inspect(ctx, "t"); info.Meta != "m" || info.Token != "to" {
		t.Fatalf("after the transfer: Inspect = %+v", info)
	}
}

// A store is never given metadata that ValidateMeta refuses, even when a
// caller put it on the context with driver.WithMeta itself.
func TestMetaFromRefusesWhatValidateMetaRefuses(t *testing.T) {
	ctx := testCtx(t)
	if got := driver.MetaFrom(driver.WithMeta(ctx, "ok")); got != "ok" {
		t.Fatalf("MetaFrom = %q, want ok", got)
	}
	for _, bad := range []string{"a\nb", strings.Repeat("x", driver.MaxMetaLen+1), "\xff"} {
		if got := driver.MetaFrom(driver.WithMeta(ctx, bad)); got != "" {
			t.Fatalf("MetaFrom(%q) = %q, want none", bad, got)
		}
	}
	if got := driver.MetaFrom(ctx); got != "" {
		t.Fatalf("MetaFrom of a bare context = %q", got)
	}
}
