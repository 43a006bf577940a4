package main

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func usageCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return -1
}

func TestStoreFlagsOpen(t *testing.T) {
	cases := []struct {
		name    string
		f       storeFlags
		wantErr string // "" = opens
		desc    string
	}{
		{name: "default", f: storeFlags{}, desc: "redis 127.0.0.1:6379"},
		{name: "redis", f: storeFlags{redisURL: "redis://u:pw@127.0.0.1:7000/2"}, desc: "redis 127.0.0.1:7000 db 2"},
		{name: "tls", f: storeFlags{redisURL: "rediss://127.0.0.1:7000"}, desc: "redis 127.0.0.1:7000 db 0 (TLS)"},
		{name: "cluster", f: storeFlags{clusterURL: "redis://127.0.0.1:7000?addr=127.0.0.1:7001"}, desc: "cluster 127.0.0.1:7000,127.0.0.1:7001"},
		{name: "sentinel", f: storeFlags{sentinelURL: "redis://127.0.0.1:26379?master_name=m&addr=127.0.0.1:26380"}, desc: "sentinel master m"},
		{name: "store URL", f: storeFlags{storeURL: "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/m"}, desc: "via 127.0.0.1:26379,127.0.0.1:26380"},
		{name: "sentinel without master", f: storeFlags{sentinelURL: "redis://127.0.0.1:26379"}, wantErr: "master_name"},
		{name: "bad scheme", f: storeFlags{redisURL: "http://127.0.0.1:1"}, wantErr: "scheme"},
		{name: "bad port", f: storeFlags{redisURL: "redis://127.0.0.1:x"}, wantErr: "port"},
		{name: "bad option", f: storeFlags{clusterURL: "redis://127.0.0.1:1?nope=1"}, wantErr: "nope"},
		{name: "two stores", f: storeFlags{redisURL: "redis://a:1", clusterURL: "redis://b:1"}, wantErr: "choose one"},
		{name: "bad redlock URL", f: storeFlags{redlockURLs: []string{"redis://a:1", "http://b:1"}}, wantErr: "--redlock"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := c.f.open(context.Background())
			if c.wantErr != "" {
				if err == nil {
					_ = st.Close()
					t.Fatalf("opened; want an error containing %q", c.wantErr)
				}
				if usageCode(err) != ExitUsage || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v (code %d); want usage error containing %q", err, usageCode(err), c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// The description is the store's own (Opened.Describe): it
			// names the servers and never the password.
			if !strings.Contains(st.Desc, c.desc) || strings.Contains(st.Desc, ":pw") {
				t.Errorf("desc %q, want it to contain %q and no password", st.Desc, c.desc)
			}
		})
	}
}

func TestURLErrorsHidePasswords(t *testing.T) {
	for _, u := range []string{"redis://user:s3cretpw@host:x", "redis://u:s3cretpw@h:1?bad=1"} {
		for _, f := range []storeFlags{{redisURL: u}, {clusterURL: u}, {sentinelURL: u + "&master_name=m"}, {redlockURLs: []string{"redis://a:1", u}}} {
			_, err := f.open(context.Background())
			if err == nil || strings.Contains(err.Error(), "s3cretpw") {
				t.Errorf("%+v: error %v; want an error without the password", f, err)
			}
		}
	}
}

func TestStoreFlagsFromEnvironment(t *testing.T) {
	t.Setenv("DLOCK_REDIS", "redis://127.0.0.1:7777")
	t.Setenv("DLOCK_PREFIX", "app:")
	var f storeFlags
	cmd := &cobra.Command{Use: "x"}
	f.register(cmd) // registration reads the environment
	if f.redisURL != "redis://127.0.0.1:7777" || f.prefix != "app:" {
		t.Fatalf("flags from environment: %+v", f)
	}
	if err := cmd.Flags().Set("redis", "redis://127.0.0.1:8888"); err != nil {
		t.Fatal(err)
	}
	if f.redisURL != "redis://127.0.0.1:8888" {
		t.Fatalf("the flag does not override the environment: %+v", f)
	}
}

func TestRunFlagValidation(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--", "true"}, "KEY is required"},
		{[]string{"run", "--key", "k"}, "missing COMMAND"},
		{[]string{"run", "--key", "k", "--lease", "1ms", "--", "true"}, "--lease 1ms"},
		{[]string{"run", "--key", "k", "--lease", "48h", "--", "true"}, "--lease 48h"},
		{[]string{"run", "--key", "k", "--wait", "-1s", "--", "true"}, "--wait -1s is negative"},
		{[]string{"run", "--key", "k", "--grace", "-1s", "--", "true"}, "--grace -1s is negative"},
		{[]string{"run", "--key", "k", "--lease", "soon", "--", "true"}, "invalid argument"},
		{[]string{"run", "--bogus", "--key", "k", "--", "true"}, "unknown flag: --bogus"},
		{[]string{"run", "--key", "k", "--redis", "http://x", "--", "true"}, "scheme"},
		{[]string{"status"}, "exactly one KEY"},
		{[]string{"status", "a", "b"}, "exactly one KEY"},
		{[]string{"status", ""}, "empty key"},
		{[]string{"list", "a", "b"}, "at most one"},
		{[]string{"doctor", "x"}, "unexpected argument"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("dlock %q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, ExitUsage, c.want)
		}
	}
}

func TestAbbrev(t *testing.T) {
	for tok, want := range map[string]string{
		"":                       "",
		"ab":                     "a",
		"abcdefghijklmnopqrstuv": "abcdef",
	} {
		if got := abbrev(tok); got != want {
			t.Errorf("abbrev(%q) = %q, want %q", tok, got, want)
		}
	}
	// The text output marks the prefix as one; the JSON gives it as it is.
	if got := (lockStatus{Held: true, Holder: "abcdef", HolderKind: holderDlock}).holderText(); got != "abcdef…" {
		t.Errorf("holderText = %q, want abcdef…", got)
	}
}

// FuzzStoreFlags checks that no store URL makes open panic, that every
// failure is a usage error without the URL's password, and that a URL Go
// cannot parse is never accepted.
func FuzzStoreFlags(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379", "rediss://u:p@h:1/0", "redis://h:1?addr=h:2&master_name=m",
		"http://h", "redis://h:x", "redis://[::1", "unix:///tmp/r.sock", "", "redis://u:p@h:1?dial_timeout=x",
		"redis://%zz@h", "redis://h:1/99999999999999999999",
	} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
		f.Add(s, uint8(2))
		f.Add(s+",redis://127.0.0.1:2", uint8(3))
	}
	f.Fuzz(func(t *testing.T, raw string, which uint8) {
		var fl storeFlags
		urls := []string{raw}
		switch which % 4 {
		case 0:
			fl.redisURL = raw
		case 1:
			fl.clusterURL = raw
		case 2:
			fl.sentinelURL = raw
		case 3:
			urls = strings.Split(raw, ",")
			fl.redlockURLs = urls
		}
		st, err := fl.open(context.Background())
		if err == nil {
			defer st.Close()
			for _, u := range urls {
				if _, perr := url.Parse(u); u != "" && perr != nil {
					t.Fatalf("accepted %q, which net/url rejects: %v", u, perr)
				}
			}
			return
		}
		if usageCode(err) != ExitUsage {
			t.Fatalf("open(%q): %v is not a usage error", raw, err)
		}
		for _, raw := range urls {
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(err.Error(), pw) {
					t.Fatalf("error for %q shows the password: %v", raw, err)
				}
			}
		}
	})
}

// TestStoreFlagsEveryVariable: each store variable docs/cli.md lists
// (DLOCK_STORE, DLOCK_REDIS, DLOCK_REDIS_CLUSTER, DLOCK_REDIS_SENTINEL,
// DLOCK_REDLOCK, with DLOCK_PREFIX) selects the store its flag selects,
// with no flag given.
func TestStoreFlagsEveryVariable(t *testing.T) {
	for _, c := range []struct{ env, val, want string }{
		{"DLOCK_STORE", "zk://127.0.0.1:2181/locks", "zk://127.0.0.1:2181/locks?prefix=app%3A"},
		{"DLOCK_REDIS", "127.0.0.1:7000", "redis://127.0.0.1:7000?prefix=app%3A"},
		{"DLOCK_REDIS_CLUSTER", "redis://127.0.0.1:7000?addr=127.0.0.1:7001", "redis+cluster://127.0.0.1:7000,127.0.0.1:7001?prefix=app%3A"},
		{"DLOCK_REDIS_SENTINEL", "redis://127.0.0.1:26379?master_name=m&addr=127.0.0.1:26380", "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/m?prefix=app%3A"},
		{"DLOCK_REDLOCK", "redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002", "redlock://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002?prefix=app%3A"},
	} {
		t.Run(c.env, func(t *testing.T) {
			for _, v := range []string{"DLOCK_STORE", "DLOCK_REDIS", "DLOCK_REDIS_CLUSTER", "DLOCK_REDIS_SENTINEL", "DLOCK_REDLOCK"} {
				t.Setenv(v, "")
			}
			t.Setenv(c.env, c.val)
			t.Setenv("DLOCK_PREFIX", "app:")
			var f storeFlags
			f.register(&cobra.Command{Use: "x"})
			got, err := f.url()
			if err != nil || got != c.want {
				t.Errorf("%s=%s: URL %q, %v; want %q", c.env, c.val, got, err, c.want)
			}
		})
	}
}
