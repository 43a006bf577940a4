package redisstore

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return u
}

// TestParseSingleForms parses every redis:// and rediss:// form.
func TestParseSingleForms(t *testing.T) {
	for _, tc := range []struct {
		raw, addr, user, pass, prefix string
		db                            int
		tls                           bool
		retention, dial               time.Duration
	}{
		{raw: "redis://127.0.0.1:6380", addr: "127.0.0.1:6380"},
		{raw: "redis://h", addr: "h:6379"},
		{raw: "redis://u:p%40ss@h:1/3", addr: "h:1", user: "u", pass: "p@ss", db: 3},
		{raw: "redis://:secret@h:2/0?prefix=app:", addr: "h:2", pass: "secret", prefix: "app:"},
		{raw: "rediss://h:6380/1?retention=45s&dial_timeout=2s", addr: "h:6380", db: 1, tls: true, retention: 45 * time.Second, dial: 2 * time.Second},
		{raw: "REDIS://h:7", addr: "h:7"},
	} {
		o, opts, err := parseSingle(mustURL(t, tc.raw))
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.pass || o.DB != tc.db ||
			(o.TLSConfig != nil) != tc.tls || opts.Prefix != tc.prefix || opts.Retention != tc.retention || o.DialTimeout != tc.dial {
			t.Errorf("%s: got addr %s user %q db %d tls %t prefix %q retention %v dial %v", tc.raw, o.Addr, o.Username, o.DB, o.TLSConfig != nil, opts.Prefix, opts.Retention, o.DialTimeout)
		}
	}
}

// TestParseClusterAndSentinelForms parses the multi-host forms.
func TestParseClusterAndSentinelForms(t *testing.T) {
	co, opts, err := parseCluster(mustURL(t, "redis+cluster://u:pw@a:7000,b,c:6380?prefix=x:&read_timeout=1s"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(co.Addrs, []string{"a:7000", "b:6379", "c:6380"}) || co.Username != "u" || co.Password != "pw" ||
		opts.Prefix != "x:" || co.ReadTimeout != time.Second || co.TLSConfig != nil {
		t.Errorf("cluster: %+v %+v", co, opts)
	}
	if co, _, err := parseCluster(mustURL(t, "rediss+cluster://a:1")); err != nil || co.TLSConfig == nil {
		t.Errorf("rediss+cluster: TLS %v, %v", co != nil && co.TLSConfig != nil, err)
	}

	fo, opts, err := parseSentinel(mustURL(t, "redis+sentinel://u:pw@s1:26379,s2:26380/mymaster?db=2&sentinel-password=spw&prefix=y:"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fo.SentinelAddrs, []string{"s1:26379", "s2:26380"}) || fo.MasterName != "mymaster" || fo.DB != 2 ||
		fo.Username != "u" || fo.Password != "pw" || fo.SentinelPassword != "spw" || fo.SentinelUsername != "" || opts.Prefix != "y:" {
		t.Errorf("sentinel: %+v %+v", fo, opts)
	}
	if fo, _, err := parseSentinel(mustURL(t, "redis+sentinel://s1/m")); err != nil || fo.SentinelPassword != "" || fo.Password != "" || fo.MasterName != "m" {
		t.Errorf("sentinel without credentials: %+v %v", fo, err)
	}
}

// TestOpenRejectsBadURLs: every bad URL is ErrInvalid, names the problem and
// never shows the password.
func TestOpenRejectsBadURLs(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"redis://u:hunter2@h:99999", "not in 1-65535"},
		{"redis://u:hunter2@h:1/x", "database"},
		{"redis://u:hunter2@h:1/0?bogus=1", "bogus"},
		{"redis://u:hunter2@h:1,h2:2", "several hosts"},
		{"redis://u:hunter2@h:1?retention=-1s", "retention"},
		{"redis://u:hunter2@h:1?prefix=", "prefix"},
		{"redis+cluster://u:hunter2@a:1,,b:2", "empty host"},
		{"redis+cluster://u:hunter2@a:1/3", "no database"},
		{"redis+cluster://u:hunter2@a:1?max_redirects=x", "max_redirects"},
		{"redis+sentinel://u:hunter2@a:1", "master-name"},
		{"redis+sentinel://u:hunter2@a:1/m/x", "path"},
		{"redis+sentinel://a:1/m?sentinel-password=hunter2&db=x", "database"},
		{"redis://u:hunter2@h:0", "not in 1-65535"},
		{"redis:u:hunter2@h:1", "host:port"},
	} {
		op, err := driver.Open(context.Background(), tc.raw)
		if err == nil {
			_ = op.Close()
			t.Errorf("%s: opened", tc.raw)
			continue
		}
		if !errors.Is(err, driver.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: want ErrInvalid naming %q without the password, got %v", tc.raw, tc.want, err)
		}
	}
}

// TestParseURLRedactsUnparsable: ParseURL's own parse error hides the
// password too.
func TestParseURLRedactsUnparsable(t *testing.T) {
	_, _, err := ParseURL("redis://u:hunter2@h:bad")
	if !errors.Is(err, driver.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("want ErrInvalid without the password, got %v", err)
	}
}

// TestDescribeHasNoPassword: Describe names the servers, never the secret.
func TestDescribeHasNoPassword(t *testing.T) {
	for _, raw := range []string{
		"redis://u:hunter2@127.0.0.1:1/2",
		"rediss://:hunter2@127.0.0.1:1?prefix=p:",
		"redis+cluster://u:hunter2@127.0.0.1:1,127.0.0.1:2",
		"redis+sentinel://u:hunter2@127.0.0.1:1/m?sentinel-password=hunter2",
	} {
		op, err := driver.Open(context.Background(), raw)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if strings.Contains(op.Describe, "hunter2") || !strings.Contains(op.Describe, "127.0.0.1:1") {
			t.Errorf("%s: Describe %q", raw, op.Describe)
		}
		if _, ok := op.Store.(*Store); !ok {
			t.Errorf("%s: store is %T", raw, op.Store)
		}
		if err := op.Close(); err != nil {
			t.Errorf("%s: Close: %v", raw, err)
		}
	}
}

// TestPassedParamsAreGoRedis: every go-redis option the openers pass on is
// one go-redis reads for that kind of URL, so the lists cannot name an
// option a go-redis upgrade dropped (an option it added is refused by the
// decoder until it is listed).
func TestPassedParamsAreGoRedis(t *testing.T) {
	val := func(p string) string {
		switch p {
		case "db", "protocol", "max_retries", "pool_size", "min_idle_conns", "max_idle_conns", "max_active_conns",
			"max_concurrent_dials", "pipeline_pool_size", "pipeline_read_buffer_size", "pipeline_write_buffer_size",
			"max_redirects", "dialer_retries", "failing_timeout_seconds":
			return "3"
		case "client_name", "master_name", "identitySuffix", "sentinel-username", "sentinel-password", "username", "password":
			return "x"
		case "pool_fifo", "skip_verify", "read_only", "route_by_latency", "route_randomly", "replica_only",
			"use_disconnected_replicas", "context_timeout_enabled", "disableIdentity", "unstable_resp3":
			return "true"
		}
		return "1s"
	}
	for _, c := range []struct {
		base   string
		params []string
		parse  func(string) error
	}{
		{"rediss://h:1", singleParams, func(s string) error { _, err := redis.ParseURL(s); return err }},
		{"rediss://h:1", clusterParams, func(s string) error { _, err := redis.ParseClusterURL(s); return err }},
		{"rediss://h:1", sentinelParams, func(s string) error { _, err := redis.ParseFailoverURL(s + "&master_name=m"); return err }},
	} {
		for _, p := range c.params {
			if p == "sentinel-username" || p == "sentinel-password" || p == "master_name" {
				continue // the store's, turned into go-redis' own
			}
			if err := c.parse(c.base + "?" + p + "=" + val(p)); err != nil {
				t.Errorf("%s passes %s=, which go-redis refuses: %v", c.base, p, err)
			}
		}
	}
}

// TestSentinelURLTakesPrimaryCredentials: the form the CLI's
// --redis-sentinel alias builds (the primary's user and password as
// go-redis' username= and password=) parses.
func TestSentinelURLTakesPrimaryCredentials(t *testing.T) {
	o, _, err := parseSentinel(mustURL(t, "redis+sentinel://h1:26379/m?password=mpw&sentinel-password=spw&sentinel-username=su"))
	if err != nil || o.Password != "mpw" || o.SentinelPassword != "spw" || o.SentinelUsername != "su" {
		t.Fatalf("parseSentinel: %+v, %v", o, err)
	}
}
