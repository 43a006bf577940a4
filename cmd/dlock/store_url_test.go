package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/memstore"
)

// The mem:// stores exist only in this test binary, to drive the CLI's
// generic commands through driver.Open in process (runCLI):
//
//	mem://full         memstore plus a Lister (the keys ever acquired)
//	mem://bare         Acquire, Extend, Release and Model only
//	mem://unsupported  Inspect and List answer errors.ErrUnsupported
//	mem://leaky        Release says yes and frees nothing (a broken store)
var (
	memShared = memstore.New(nil)
	memKeys   sync.Map // key -> true, every key acquired on mem://full
)

func init() {
	driver.Register("mem", func(_ context.Context, u *url.URL) (*driver.Opened, error) {
		var s driver.Mutex
		switch u.Host {
		case "full":
			s = &listingStore{Mutex: memShared}
		case "bare":
			s = bareStore{memShared}
		case "unsupported":
			s = unsupportedStore{memShared}
		case "leaky":
			s = leakyStore{memShared}
		default:
			return nil, driver.ErrInvalid
		}
		return &driver.Opened{Store: s, Close: func() error { return nil }, Describe: "mem " + u.Host}, nil
	})
}

// listingStore adds a Lister to memstore; its other capabilities are
// found through Unwrap.
type listingStore struct{ driver.Mutex }

func (s *listingStore) Unwrap() driver.Mutex { return s.Mutex }

func (s *listingStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	memKeys.Store(key, true)
	return s.Mutex.Acquire(ctx, key, token, ttl)
}

func (s *listingStore) List(ctx context.Context, prefix string, fn func(string, driver.Info) bool) error {
	var keys []string
	memKeys.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			keys = append(keys, k.(string))
		}
		return true
	})
	slices.Sort(keys)
	for _, k := range keys {
		info, err := memShared.Inspect(ctx, k)
		if err != nil {
			return err
		}
		if !fn(k, info) {
			return nil
		}
	}
	return nil
}

// bareStore hides every capability (no Unwrap).
type bareStore struct{ driver.Mutex }

type unsupportedStore struct{ driver.Mutex }

func (unsupportedStore) Inspect(context.Context, string) (driver.Info, error) {
	return driver.Info{}, driver.Unsupported("inspect", "a node is down")
}

func (unsupportedStore) List(context.Context, string, func(string, driver.Info) bool) error {
	return driver.Unsupported("list", "a node is down")
}

// leakyStore's Release frees nothing; its Inspect is memstore's.
type leakyStore struct{ driver.Mutex }

func (leakyStore) Release(context.Context, string, string) error { return nil }

func (s leakyStore) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return s.Mutex.(driver.Inspector).Inspect(ctx, key)
}

// holdMem takes key on the shared memstore through mem://full and returns
// the lease.
func holdMem(t *testing.T, key string) *dlock.Lease {
	t.Helper()
	o, err := driver.Open(t.Context(), "mem://full")
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(o.Store.(driver.Mutex), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	l, err := c.TryLock(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

func TestStatusAndListByStoreURL(t *testing.T) {
	l := holdMem(t, "jobs/nightly")
	holdMem(t, "other")
	code, out, stderr := runCLI(t, "status", "--json", "--store", "mem://full", "jobs/nightly")
	var st lockStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status --store mem://full: exit %d, %q %q", code, out, stderr)
	}
	if !st.Held || st.Fence != l.Fence() || st.Holder != abbrev(l.Token()) || st.Waiters != nil {
		t.Fatalf("status = %+v, want the lease's holder and fence %d, waiters unknown (no WaiterCounter)", st, l.Fence())
	}
	if strings.Contains(out, l.Token()) {
		t.Fatal("status printed the whole token")
	}
	code, out, stderr = runCLI(t, "list", "--json", "--store", "mem://full", "jobs/*")
	var rows []lockStatus
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
		t.Fatalf("list: exit %d, %q %q", code, out, stderr)
	}
	if len(rows) != 1 || rows[0].Key != "jobs/nightly" { // '*' crosses '/'; "other" does not match
		t.Fatalf("list jobs/* = %+v, want jobs/nightly alone", rows)
	}
	// DLOCK_STORE selects the store as --store does.
	t.Setenv("DLOCK_STORE", "mem://full")
	if code, out, _ := runCLI(t, "status", "other"); code != 0 || !strings.Contains(out, "held:     yes") {
		t.Fatalf("status with DLOCK_STORE: exit %d, %q", code, out)
	}
}

func TestMissingCapabilitiesHaveExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", "--store", "mem://bare", "k"}, ExitUsage, "cannot inspect locks"},
		{[]string{"list", "--store", "mem://bare"}, ExitUsage, "cannot list locks"},
		{[]string{"list", "--store", "mem://full", "--json"}, 0, ""}, // control: the same command on a store that can
		{[]string{"status", "--store", "mem://unsupported", "k"}, ExitUnavailable, "cannot inspect it now"},
		{[]string{"list", "--store", "mem://unsupported"}, ExitUnavailable, "cannot list locks now"},
		{[]string{"status", "--store", "nosuch://x", "k"}, ExitUsage, `unknown scheme "nosuch"`},
		{[]string{"status", "--store", "mem://full", "--redis", "redis://127.0.0.1:1", "k"}, ExitUsage, "choose one store: --store and --redis"},
		// The demo runs the articles' Redis strategies: another store is refused before anything starts.
		{[]string{"demo", "--store", "mem://full"}, ExitUsage, "needs a redis:// or rediss:// URL"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

func TestDoctorProbeOnAnyStore(t *testing.T) {
	code, out, stderr := runCLI(t, "doctor", "--store", "mem://full")
	if code != 0 {
		t.Fatalf("doctor on memstore: exit %d, %s %s", code, out, stderr)
	}
	for _, want := range []string{"dlock doctor: mem full", "model: TTL", "OK    probe acquire", "OK    probe extend",
		"OK    probe release", "OK    probe inspect", "WARN  store checks", "no unsafe setting"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	// Negative control: a store whose Release frees nothing fails the probe.
	code, out, _ = runCLI(t, "doctor", "--json", "--store", "mem://leaky")
	var rep doctorReport
	if code != ExitUnsafe || json.Unmarshal([]byte(out), &rep) != nil || rep.Safe {
		t.Fatalf("doctor on a store that does not release: exit %d, %s; want %d", code, out, ExitUnsafe)
	}
	if st, d := statusOf(t, rep, "probe inspect"); st != statusFail || !strings.Contains(d, "still held") {
		t.Fatalf("probe inspect on a leaky store: %s %s", st, d)
	}
	// A store without an Inspector still gets the probe, minus the check.
	if code, out, _ = runCLI(t, "doctor", "--store", "mem://bare"); code != 0 || strings.Contains(out, "probe inspect") ||
		!strings.Contains(out, "OK    probe release") {
		t.Fatalf("doctor on a bare store: exit %d:\n%s", code, out)
	}
}

func TestRunAndBenchByStoreURL(t *testing.T) {
	code, out, stderr := runCLI(t, "run", "--store", "mem://full", "--key", "job", "--wait", "0", "--", "sh", "-c", `echo "fence=$DLOCK_FENCE"`)
	if code != 0 || !strings.Contains(out, "fence=") || strings.Contains(out, "fence=\n") {
		t.Fatalf("run --store mem://full: exit %d, %q %q", code, out, stderr)
	}
	holdMem(t, "busy")
	if code, _, stderr := runCLI(t, "run", "--store", "mem://full", "--key", "busy", "--wait", "0", "--", "true"); code != ExitNotAcquired {
		t.Fatalf("run on a held key: exit %d, %q; want %d", code, stderr, ExitNotAcquired)
	}
	code, out, stderr = runCLI(t, "bench", "--store", "mem://full", "--duration", "100ms", "--goroutines", "4")
	if code != 0 || !strings.Contains(out, "against mem full") || !strings.Contains(out, "one-key") {
		t.Fatalf("bench --store mem://full: exit %d, %q %q", code, out, stderr)
	}
}

// TestAliasURLs: each alias flag builds the store URL it stands for.
func TestAliasURLs(t *testing.T) {
	for _, c := range []struct {
		f    storeFlags
		want string
	}{
		{storeFlags{}, "redis://127.0.0.1:6379"},
		{storeFlags{prefix: "app:"}, "redis://127.0.0.1:6379?prefix=app%3A"},
		{storeFlags{redisURL: "127.0.0.1:7000"}, "redis://127.0.0.1:7000"},
		{storeFlags{redisURL: "rediss://u:pw@h:7000/2"}, "rediss://u:pw@h:7000/2"},
		{storeFlags{clusterURL: "redis://u:pw@h1:7000?addr=h2:7001&addr=h3:7002&dial_timeout=1s"},
			"redis+cluster://u:pw@h1:7000,h2:7001,h3:7002?dial_timeout=1s"},
		{storeFlags{sentinelURL: "redis://h1:26379/3?master_name=mymaster&addr=h2:26379"},
			"redis+sentinel://h1:26379,h2:26379/mymaster?db=3"},
		// go-redis' user information is the Sentinels'; the store URL's is the master's.
		{storeFlags{sentinelURL: "redis://su:spw@h1:26379?master_name=m&password=mpw"},
			"redis+sentinel://h1:26379/m?password=mpw&sentinel-password=spw&sentinel-username=su"},
		{storeFlags{redlockURLs: []string{"redis://h1:1", "h2:2", "redis://h3:3"}, prefix: "p:"}, "redlock://h1:1,h2:2,h3:3?prefix=p%3A"},
		{storeFlags{redlockURLs: []string{"redis://a:x@h1:1", "redis://b:y@h2:2"}},
			"redlock://?node=redis%3A%2F%2Fa%3Ax%40h1%3A1&node=redis%3A%2F%2Fb%3Ay%40h2%3A2"},
		{storeFlags{storeURL: "redis+cluster://h1:1,h2:2?prefix=x"}, "redis+cluster://h1:1,h2:2?prefix=x"},
	} {
		got, err := c.f.url()
		if err != nil || got != c.want {
			t.Errorf("%+v: url() = %q, %v; want %q", c.f, got, err, c.want)
		}
	}
	f := storeFlags{storeURL: "redis://h:1?prefix=a", prefix: "b"}
	if _, err := f.url(); usageCode(err) != ExitUsage {
		t.Errorf("--prefix disagreeing with the URL's: %v, want a usage error", err)
	}
}

// TestStoreURLErrorsHidePasswords: an opener's error for a --store URL
// never shows the password, whatever the opener wrote.
func TestStoreURLErrorsHidePasswords(t *testing.T) {
	for _, u := range []string{"redis://user:s3cretpw@host:x", "redis+cluster://u:s3cretpw@h:1?nope=1",
		"redlock://?node=redis%3A%2F%2Fu%3As3cretpw%40h%3Ax", "nosuch://u:s3cretpw@h"} {
		code, _, stderr := runCLI(t, "status", "--store", u, "k")
		if code != ExitUsage || strings.Contains(stderr, "s3cretpw") {
			t.Errorf("--store %s: exit %d, stderr %q; want %d without the password", u, code, stderr, ExitUsage)
		}
	}
	// The redaction itself, on an error that quotes the URL.
	err := redact("redis://u:s3cretpw@h:1", &url.Error{Op: "parse", URL: "redis://u:s3cretpw@h:1", Err: driver.ErrInvalid})
	if strings.Contains(err.Error(), "s3cretpw") || !strings.Contains(err.Error(), "REDACTED") {
		t.Fatalf("redact: %v", err)
	}
}

// TestRedactKeepsPasswordlessUserName: a user name without a password is no
// secret and stays, so an error about a postgres:// URL of the user postgres
// still reads "postgres URL" (it read "REDACTED URL"); a password next to
// the same name is still removed.
func TestRedactKeepsPasswordlessUserName(t *testing.T) {
	raw := "postgres://postgres@h:5432/db?sweep=bogus"
	err := redact(raw, fmt.Errorf("postgres URL: sweep: bad: %w", driver.ErrInvalid))
	if got := err.Error(); !strings.HasPrefix(got, "postgres URL: sweep: bad: ") || strings.Contains(got, "REDACTED") || !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("redact(%s) = %q", raw, got)
	}
	raw = "postgres://postgres:s3cretpw@h:5432/db"
	err = redact(raw, fmt.Errorf("postgres URL %s: bad: %w", raw, driver.ErrInvalid))
	if strings.Contains(err.Error(), "s3cretpw") || !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("redact(%s) = %q", raw, err)
	}
}

// TestStoreURLOnRedis: --store with a redis:// URL and ?prefix= locks under
// that prefix: status with the same URL sees the holder, status under the
// default prefix does not (the prefix is honoured, not dropped).
func TestStoreURLOnRedis(t *testing.T) {
	srv := redisserver.Start(t)
	store := srv.URL() + "?prefix=app:"
	dir := t.TempDir()
	startDlock(t, []string{"D=" + dir, "DLOCK_STORE=" + store}, "run", "--key", "job", "--", "sh", "-c",
		`echo $$ > "$D/pid"; echo > "$D/ready"; exec sleep 60`)
	t.Cleanup(func() { killGroupOf(t, filepath.Join(dir, "pid")) })
	testkit.WaitFor(t, 20*time.Second, "the holder", func() bool { return fileExists(filepath.Join(dir, "ready")) })
	held(t, "--store", store, "job")
	if r := runDlock(t, nil, "status", "--store", srv.URL(), "job"); r.code != 0 || !strings.Contains(r.stdout, "held:     no") {
		t.Fatalf("status under the default prefix must not see app:'s lock: %s", r)
	}
	if n, err := srv.Do("EXISTS", "app:{job}"); err != nil || n != "1" {
		t.Fatalf("EXISTS app:{job} = %q, %v; want 1", n, err)
	}
	if r := runDlock(t, nil, "list", "--store", store); r.code != 0 || !strings.Contains(r.stdout, "\njob ") {
		t.Fatalf("list --store %s: %s", store, r)
	}
	if r := runDlock(t, nil, "doctor", "--store", store); r.code != 0 || !strings.Contains(r.stdout, "OK    probe release") {
		t.Fatalf("doctor --store %s: %s", store, r)
	}
}

// TestPrefixOnZooKeeperAndSQLURLs: --prefix is ?prefix= on a zk:// URL
// (zkstore puts it in front of every lock name, under the path); on an SQL
// URL, whose path is the database, it is a usage error pointing at ?table=.
func TestPrefixOnZooKeeperAndSQLURLs(t *testing.T) {
	if got, err := withPrefix("zk://h:2181,h2:2181/locks?session-timeout=4s", "app/"); err != nil || got != "zk://h:2181,h2:2181/locks?prefix=app%2F&session-timeout=4s" {
		t.Errorf("zk: %q %v", got, err)
	}
	for _, u := range []string{"postgres://u:p@h:5432/app", "postgresql://h/app", "mysql://u:p@h:3306/app"} {
		_, err := withPrefix(u, "locks")
		if usageCode(err) != ExitUsage || !strings.Contains(err.Error(), "?table=") || strings.Contains(err.Error(), ":p@") {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// TestRedactShortPassword: a short password is removed where it stands
// alone but not from inside other words: with the password "p", an
// unreachable mysql:// URL was reported as "dial tcREDACTED 127.0.0.1:1".
func TestRedactShortPassword(t *testing.T) {
	raw := "mysql://u:p@127.0.0.1:1/db"
	err := redact(raw, fmt.Errorf("connect: dial tcp 127.0.0.1:1: refused (password p, dsn u:p@tcp): %w", driver.ErrUnavailable))
	want := "connect: dial tcp 127.0.0.1:1: refused (password REDACTED, dsn REDACTED@tcp): " + driver.ErrUnavailable.Error()
	if got := err.Error(); got != want || !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("redact(%s) = %q, want %q", raw, got, want)
	}
}
