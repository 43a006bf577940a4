package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// The URL schemes this package registers with driver.Register (see the
// package documentation for their forms).
const (
	SchemeRedis            = "redis"
	SchemeRedisTLS         = "rediss"
	SchemeRedisCluster     = "redis+cluster"
	SchemeRedisClusterTLS  = "rediss+cluster"
	SchemeRedisSentinel    = "redis+sentinel"
	SchemeRedisSentinelTLS = "rediss+sentinel"
)

func init() {
	for _, s := range []string{SchemeRedis, SchemeRedisTLS} {
		driver.Register(s, openSingle)
	}
	for _, s := range []string{SchemeRedisCluster, SchemeRedisClusterTLS} {
		driver.Register(s, openCluster)
	}
	for _, s := range []string{SchemeRedisSentinel, SchemeRedisSentinelTLS} {
		driver.Register(s, openSentinel)
	}
}

// ParseURL parses the URL of one Redis server, redis://[user:pass@]host:port[/db]
// or rediss:// for TLS, into go-redis options and the store's options: the
// query parameters prefix= (Options.Prefix), retention= (Options.Retention,
// a Go duration), fair=true (Options.Fair) and waiter_lease=
// (Options.WaiterLease, only with fair=true) are the store's, and on rediss:// cacert= (a PEM file of
// the authorities to check the server's certificate against instead of the
// system's roots), cert= and key= (a client certificate, both or neither)
// set the TLS configuration (driver.TLSFromFiles); go-redis' own options
// (dial_timeout=, max_retries=, skip_verify=, …; see redis.ParseURL) are
// passed on, and any other parameter is refused. A missing port means 6379. Errors match driver.ErrInvalid
// and never contain the password.
func ParseURL(rawURL string) (*redis.Options, *Options, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, invalidURL("redis", rawURL, err)
	}
	return parseSingle(u)
}

func parseSingle(u *url.URL) (*redis.Options, *Options, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != SchemeRedis && scheme != SchemeRedisTLS {
		return nil, nil, fmt.Errorf("%w: store URL: scheme %q is not redis or rediss", driver.ErrInvalid, u.Scheme)
	}
	opts, tc, rest, err := storeQuery(u, singleParams)
	if err != nil {
		return nil, nil, err
	}
	if u.Opaque != "" {
		return nil, nil, fmt.Errorf("%w: %s URL: write %s://host:port", driver.ErrInvalid, scheme, scheme)
	}
	if strings.Contains(u.Host, ",") {
		return nil, nil, fmt.Errorf("%w: %s URL names several hosts: use redis+cluster:// or redis+sentinel://, or redlock:// for independent servers", driver.ErrInvalid, scheme)
	}
	g := *u
	g.Scheme, g.RawQuery = scheme, rest.Encode()
	o, err := redis.ParseURL(g.String())
	if err == nil {
		err = checkAddrs(o.Addr)
	}
	if err != nil {
		return nil, nil, invalidURL(scheme, u.String(), err)
	}
	o.TLSConfig = withFiles(o.TLSConfig, tc)
	return o, opts, nil
}

// urlParams are the store's own URL parameters (driver.DecodeQuery); the
// TLS files need a rediss scheme.
type urlParams struct {
	Prefix    string          `param:"prefix,nonempty"`
	Retention time.Duration   `param:"retention,positive"`
	Fair      bool            `param:"fair"`
	Lease     time.Duration   `param:"waiter_lease,positive"`
	TLS       driver.TLSFiles `param:",scheme=rediss|rediss+cluster|rediss+sentinel"`
}

// The go-redis options each kind of URL passes on (redis.ParseURL,
// ParseClusterURL, ParseFailoverURL read them), besides the store's own.
var (
	redisParams = []string{
		"protocol", "client_name", "max_retries", "min_retry_backoff", "max_retry_backoff",
		"dial_timeout", "read_timeout", "write_timeout", "pool_fifo", "pool_size", "pool_timeout",
		"min_idle_conns", "max_idle_conns", "max_active_conns", "max_concurrent_dials",
		"pipeline_pool_size", "pipeline_read_buffer_size", "pipeline_write_buffer_size",
		"conn_max_idle_time", "conn_max_lifetime", "conn_max_lifetime_jitter",
	}
	singleParams  = append(slices.Clip(redisParams), "db", "skip_verify", "idle_timeout", "max_conn_age")
	clusterParams = append(slices.Clip(redisParams), "max_redirects", "read_only", "route_by_latency",
		"route_by_latency_tolerance", "route_randomly", "dialer_retries", "dialer_retry_timeout",
		"failing_timeout_seconds")
	sentinelParams = append(slices.Clip(redisParams), "db", "skip_verify", "master_name", "sentinel-username", "sentinel-password", "username", "password",
		"route_by_latency", "route_by_latency_tolerance", "route_randomly", "replica_only",
		"use_disconnected_replicas", "dialer_retries", "dialer_retry_timeout", "context_timeout_enabled",
		"disableIdentity", "identitySuffix", "unstable_resp3")
)

// NodeParams returns the go-redis options a redis:// URL passes on to its
// client (dial_timeout=, max_retries=, …, db=, skip_verify=): what a URL
// that builds redis:// URLs of its own, such as redlock://, may carry.
func NodeParams() []string { return slices.Clone(singleParams) }

// storeQuery decodes the store's own parameters of u's query and returns
// the rest (go-redis' options, those of pass). The TLS files (cacert=,
// cert=, key=) are read into tc, nil when the URL names none.
func storeQuery(u *url.URL, pass []string) (opts *Options, tc *tls.Config, rest url.Values, err error) {
	var p urlParams
	if rest, err = driver.DecodeQuery(u, &p, pass...); err != nil {
		return nil, nil, nil, err
	}
	if p.TLS.Any() {
		if sv, _ := strconv.ParseBool(rest.Get("skip_verify")); sv && p.TLS.CACert != "" {
			return nil, nil, nil, fmt.Errorf("%w: store URL: skip_verify=true checks no certificate: drop it or cacert=", driver.ErrInvalid)
		}
		if tc, err = p.TLS.Config(); err != nil {
			return nil, nil, nil, fmt.Errorf("store URL: %w", err)
		}
	}
	if p.Lease != 0 && !p.Fair {
		return nil, nil, nil, fmt.Errorf("%w: store URL: waiter_lease= needs fair=true", driver.ErrInvalid)
	}
	return &Options{Prefix: p.Prefix, Retention: p.Retention, Fair: p.Fair, WaiterLease: p.Lease}, tc, rest, nil
}

// withFiles puts the URL's TLS files (tc, from storeQuery) into the TLS
// configuration go-redis made for a rediss URL, keeping its server name.
func withFiles(made, tc *tls.Config) *tls.Config {
	if tc == nil {
		return made
	}
	if made != nil {
		tc.ServerName = made.ServerName
	}
	return tc
}

// splitHosts splits a comma-separated host list (the host part of a
// cluster, sentinel or redlock URL) into host:port addresses, 6379 where a
// port is missing. IPv6 literals are not supported in a list.
func splitHosts(hostList string) ([]string, error) {
	var addrs []string
	for _, h := range strings.Split(hostList, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, fmt.Errorf("empty host in the list %q", hostList)
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "6379")
		}
		if err := checkAddrs(h); err != nil {
			return nil, err
		}
		addrs = append(addrs, h)
	}
	return addrs, nil
}

// checkAddrs rejects a host:port whose host is empty or whose port is not in
// 1-65535.
func checkAddrs(addrs ...string) error {
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("address %q: %w", a, err)
		}
		if host == "" {
			return fmt.Errorf("address %q: no host", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("address %q: port %s is not in 1-65535", a, port)
		}
	}
	return nil
}

// invalidURL is a URL error matching driver.ErrInvalid, with the URL's
// password cut out of the message (parse errors may quote the URL).
func invalidURL(scheme, rawURL string, err error) error {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, url.QueryEscape(p), "REDACTED")
			msg = strings.ReplaceAll(msg, url.PathEscape(p), "REDACTED")
			msg = strings.ReplaceAll(msg, p, "REDACTED")
		}
	} else if at := strings.LastIndex(rawURL, "@"); at >= 0 {
		// Unparsable: cut everything between the scheme and the '@'.
		start := strings.Index(rawURL, "://") + 3
		if start < 3 || start > at {
			start = 0
		}
		if ui := rawURL[start:at]; ui != "" {
			msg = strings.ReplaceAll(msg, ui, "REDACTED")
		}
	}
	return fmt.Errorf("%w: %s URL: %s", driver.ErrInvalid, scheme, msg)
}

// opened wraps a store and the client the opener created.
// With opts.Fair the store is a FairStore.
func opened(client redis.UniversalClient, opts *Options, describe string) (*driver.Opened, error) {
	var (
		s interface {
			driver.Mutex
			Close() error
		}
		err error
	)
	if opts.Fair {
		var f *FairStore
		f, err = NewFair(client, opts)
		s = f
		if err == nil {
			describe += fmt.Sprintf(", fair (waiter lease %v)", f.WaiterLease())
		}
	} else {
		s, err = New(client, opts)
	}
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	if opts.Prefix != "" && opts.Prefix != DefaultPrefix {
		describe += ", prefix " + opts.Prefix
	}
	return &driver.Opened{Store: s, Describe: describe, Close: func() error {
		return errors.Join(s.Close(), client.Close())
	}}, nil
}

// tlsNote is the Describe suffix of a TLS scheme.
func tlsNote(scheme string) string {
	if strings.HasPrefix(strings.ToLower(scheme), "rediss") {
		return " (TLS)"
	}
	return ""
}

func userNote(u *url.URL) string {
	if u.User != nil && u.User.Username() != "" {
		return " as user " + u.User.Username()
	}
	return ""
}

// openSingle is the opener of redis:// and rediss://. It makes no network
// call.
func openSingle(_ context.Context, u *url.URL) (*driver.Opened, error) {
	o, opts, err := parseSingle(u)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("redis %s db %d%s%s", o.Addr, o.DB, userNote(u), tlsNote(u.Scheme))
	return opened(redis.NewClient(o), opts, desc)
}

// baseScheme is the go-redis scheme behind one of this package's schemes.
func baseScheme(scheme string) string {
	if strings.HasPrefix(strings.ToLower(scheme), "rediss") {
		return SchemeRedisTLS
	}
	return SchemeRedis
}

// parseCluster parses redis+cluster://[user:pass@]host:port,host:port[?…]:
// the hosts are seeds (any reachable node will do), the query as for ParseURL.
func parseCluster(u *url.URL) (*redis.ClusterOptions, *Options, error) {
	opts, tc, rest, err := storeQuery(u, clusterParams)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := splitHosts(u.Host)
	if err != nil {
		return nil, nil, invalidURL(u.Scheme, u.String(), err)
	}
	if strings.Trim(u.Path, "/") != "" {
		return nil, nil, fmt.Errorf("%w: %s URL: a Cluster has no database number or path (got %q)", driver.ErrInvalid, u.Scheme, u.Path)
	}
	for _, a := range addrs[1:] {
		rest.Add("addr", a)
	}
	g := url.URL{Scheme: baseScheme(u.Scheme), User: u.User, Host: addrs[0], RawQuery: rest.Encode()}
	o, err := redis.ParseClusterURL(g.String())
	if err == nil {
		err = checkAddrs(o.Addrs...)
	}
	if err != nil {
		return nil, nil, invalidURL(u.Scheme, g.String(), err)
	}
	o.TLSConfig = withFiles(o.TLSConfig, tc)
	return o, opts, nil
}

// parseSentinel parses
// redis+sentinel://[user:pass@]host:port,host:port/<master-name>[?db=N&sentinel-username=…&sentinel-password=…]:
// the hosts are the Sentinels, user:pass the primary's credentials, and
// sentinel-username and sentinel-password the Sentinels' own (none if
// absent). Other query parameters are as for ParseURL.
func parseSentinel(u *url.URL) (*redis.FailoverOptions, *Options, error) {
	opts, tc, rest, err := storeQuery(u, sentinelParams)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := splitHosts(u.Host)
	if err != nil {
		return nil, nil, invalidURL(u.Scheme, u.String(), err)
	}
	master := strings.Trim(u.Path, "/")
	switch {
	case strings.Contains(master, "/"):
		return nil, nil, fmt.Errorf("%w: %s URL: the path must be /<master-name> alone (got %q)", driver.ErrInvalid, u.Scheme, u.Path)
	case master == "" && rest.Get("master_name") == "":
		return nil, nil, fmt.Errorf("%w: %s URL needs the primary's name as its path: %s://host:port,host:port/<master-name>", driver.ErrInvalid, u.Scheme, u.Scheme)
	case master != "":
		rest.Set("master_name", master)
	}
	var sentinelUser *url.Userinfo
	if su, sp := rest.Get("sentinel-username"), rest.Get("sentinel-password"); su != "" || sp != "" {
		sentinelUser = url.UserPassword(su, sp)
	}
	rest.Del("sentinel-username")
	rest.Del("sentinel-password")
	for _, a := range addrs[1:] {
		rest.Add("addr", a)
	}
	g := url.URL{Scheme: baseScheme(u.Scheme), User: sentinelUser, Host: addrs[0], RawQuery: rest.Encode()}
	o, err := redis.ParseFailoverURL(g.String())
	if err == nil {
		err = checkAddrs(o.SentinelAddrs...)
	}
	if err != nil {
		return nil, nil, invalidURL(u.Scheme, g.String(), err)
	}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	o.TLSConfig = withFiles(o.TLSConfig, tc)
	return o, opts, nil
}

// openCluster is the opener of redis+cluster:// and rediss+cluster://. It
// makes no network call.
func openCluster(_ context.Context, u *url.URL) (*driver.Opened, error) {
	o, opts, err := parseCluster(u)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("redis cluster %s%s%s", strings.Join(o.Addrs, ","), userNote(u), tlsNote(u.Scheme))
	return opened(redis.NewClusterClient(o), opts, desc)
}

// openSentinel is the opener of redis+sentinel:// and rediss+sentinel://. It
// makes no network call.
func openSentinel(_ context.Context, u *url.URL) (*driver.Opened, error) {
	o, opts, err := parseSentinel(u)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("redis sentinel master %s db %d via %s%s%s", o.MasterName, o.DB, strings.Join(o.SentinelAddrs, ","), userNote(u), tlsNote(u.Scheme))
	op, err := opened(redis.NewFailoverClient(o), opts, desc)
	if err != nil {
		return nil, err
	}
	switch s := op.Store.(type) {
	case *Store:
		s.sentinel = o
	case *FairStore:
		s.s.sentinel = o
	}
	return op, nil
}
