package drivertest

import (
	"strings"
	"testing"

	"example.com/dlock/driver"
)

// Cases for driver.MetaKeeper.

// testMeta: on a store that keeps holder metadata, the metadata an
// acquisition's ctx carries (driver.WithMeta) is what Inspect and List
// report, through another store value too, for as long as the holding
// lasts: re-entries (whatever their own ctx carries), extensions and
// partial releases keep it; a holding whose ctx carries none reports none,
// also on a key that had metadata before; it never holds the token. A
// Queuer's grant keeps it as an Acquire's does.
func (s *suite) testMeta(t *testing.T, m driver.Mutex) {
	if mk, ok := driver.As[driver.MetaKeeper](m); !ok || !mk.KeepsMeta() {
		t.Skip("store does not keep holder metadata (driver.MetaKeeper)")
	}
	in, ok := driver.As[driver.Inspector](s.client(t))
	if !ok {
		t.Skip("store does not implement driver.Inspector: metadata cannot be read back")
	}
	const meta = "host=a pid=1 cmd=job ü"
	key, tok := Key(t), Token()
	wantMeta := func(what, want string) {
		t.Helper()
		info := inspect(t, in, key)
		if info.Meta != want || (want != "" && !info.Held) {
			t.Fatalf("%s: Inspect = {Held %v, Meta %q}; want Meta %q", what, info.Held, info.Meta, want)
		}
		if strings.Contains(info.Meta, tok) {
			t.Fatalf("%s: Meta holds the token", what)
		}
	}
	_, err := m.Acquire(driver.WithMeta(ctx(t), meta), key, tok, s.long)
	if err != nil {
		t.Fatalf("Acquire with metadata: %v", err)
	}
	wantMeta("held", meta)
	if l, ok := driver.As[driver.Lister](m); ok {
		var got driver.Info
		if err := l.List(ctx(t), key, func(k string, i driver.Info) bool { got = i; return k != key }); err != nil || got.Meta != meta {
			t.Fatalf("List: Meta %q, %v; want %q", got.Meta, err, meta)
		}
	}
	if _, err := m.Acquire(driver.WithMeta(ctx(t), "other"), key, tok, s.long); err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	wantMeta("re-entered with other metadata", meta)
	if _, err := m.Extend(ctx(t), key, tok, s.long); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	wantMeta("extended", meta)
	mustRelease(t, m, key, tok)
	wantMeta("one of two holds released", meta)
	mustRelease(t, m, key, tok)
	wantMeta("released", "")

	tok = Token()
	mustAcquire(t, m, key, tok, s.long)
	wantMeta("held without metadata after a holding with it", "")
	mustRelease(t, m, key, tok)

	if q, ok := driver.As[driver.Queuer](m); ok {
		tok = Token()
		if _, err := q.AcquireQueued(driver.WithMeta(ctx(t), meta), key, tok, s.long); err != nil {
			t.Fatalf("AcquireQueued with metadata: %v", err)
		}
		wantMeta("granted by the queue", meta)
		mustRelease(t, m, key, tok)
	}
}
