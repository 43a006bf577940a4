package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The alias flags (--redis, --redis-cluster, --redis-sentinel, --redlock)
// take go-redis' URL forms, as they always did; each is checked with
// go-redis' own parser (so that a typo is a usage error, not an unreachable
// server) and turned into the store URL it stands for. Their errors never
// contain a password.

// redisAlias is --redis: the URL itself (a bare host:port means
// redis://host:port).
func redisAlias(raw string) (string, error) {
	if _, err := parseRedisURL(raw); err != nil {
		return "", fmt.Errorf("--redis: %w", err)
	}
	return withScheme(raw), nil
}

// clusterAlias is --redis-cluster redis://h1:p1?addr=h2:p2&addr=...:
// redis+cluster://h1:p1,h2:p2,... with the other options kept
// (rediss+cluster:// for TLS).
func clusterAlias(raw string) (string, error) {
	full := withScheme(raw)
	o, err := redis.ParseClusterURL(full)
	if err == nil {
		err = checkAddrs(o.Addrs...)
	}
	if err != nil {
		return "", fmt.Errorf("--redis-cluster: %w", redact(raw, err))
	}
	u, err := url.Parse(full)
	if err != nil {
		return "", fmt.Errorf("--redis-cluster: %w", redact(raw, err))
	}
	q := u.Query()
	u.Host = strings.Join(append([]string{u.Host}, q["addr"]...), ",")
	q.Del("addr")
	u.Scheme += "+cluster"
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// sentinelAlias is --redis-sentinel redis://s1:p1/db?master_name=M&addr=s2:p2:
// redis+sentinel://s1:p1,s2:p2/M?db=N with the other options kept. In
// go-redis' form the user information is the Sentinels' (the master's comes
// from username= and password=); in the store URL it is the master's, so it
// moves to sentinel-username= and sentinel-password=.
func sentinelAlias(raw string) (string, error) {
	full := withScheme(raw)
	o, err := redis.ParseFailoverURL(full)
	if err == nil {
		err = checkAddrs(o.SentinelAddrs...)
	}
	if err != nil {
		return "", fmt.Errorf("--redis-sentinel: %w", redact(raw, err))
	}
	if o.MasterName == "" {
		return "", errors.New("--redis-sentinel: the URL needs ?master_name=NAME")
	}
	u, err := url.Parse(full)
	if err != nil {
		return "", fmt.Errorf("--redis-sentinel: %w", redact(raw, err))
	}
	q := u.Query()
	u.Host = strings.Join(append([]string{u.Host}, q["addr"]...), ",")
	q.Del("addr")
	q.Del("master_name")
	if u.User != nil {
		if name := u.User.Username(); name != "" {
			q.Set("sentinel-username", name)
		}
		if pw, ok := u.User.Password(); ok {
			q.Set("sentinel-password", pw)
		}
		u.User = nil
	}
	if o.DB != 0 {
		q.Set("db", strconv.Itoa(o.DB))
	}
	u.Path, u.RawPath = "/"+o.MasterName, ""
	u.Scheme += "+sentinel"
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// redlockAlias is --redlock URL,URL,...: redlock://[user:pass@]h1,h2,h3
// when every node is a plain redis:// URL with the same user information
// and nothing else, else redlock://?node=URL&node=URL... with each node's
// URL whole.
func redlockAlias(raws []string) (string, error) {
	var (
		hosts    []string
		nodes    []string
		userinfo *url.Userinfo
		compact  = true
	)
	for i, raw := range raws {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return "", errors.New("--redlock: empty URL")
		}
		if _, err := parseRedisURL(raw); err != nil {
			return "", fmt.Errorf("--redlock: %w", err)
		}
		full := withScheme(raw)
		u, err := url.Parse(full)
		if err != nil {
			return "", fmt.Errorf("--redlock: %w", redact(raw, err))
		}
		if i == 0 {
			userinfo = u.User
		}
		if u.Scheme != "redis" || u.RawQuery != "" || (u.Path != "" && u.Path != "/" && u.Path != "/0") ||
			u.User.String() != userinfo.String() {
			compact = false
		}
		hosts = append(hosts, u.Host)
		nodes = append(nodes, full)
	}
	if compact {
		u := url.URL{Scheme: "redlock", User: userinfo, Host: strings.Join(hosts, ",")}
		return u.String(), nil
	}
	return "redlock://?" + url.Values{"node": nodes}.Encode(), nil
}

// withScheme lets a bare host:port stand for redis://host:port, the form
// redis-cli users type; anything with a scheme is left to the parser.
func withScheme(u string) string {
	if strings.Contains(u, "://") {
		return u
	}
	return "redis://" + u
}

// parseRedisURL parses one server's URL (a bare host:port is accepted) and
// checks its port, so that a typo is a usage error rather than an
// unreachable server. Its errors never contain the URL's password.
func parseRedisURL(u string) (*redis.Options, error) {
	o, err := redis.ParseURL(withScheme(u))
	if err == nil {
		err = checkAddrs(o.Addr)
	}
	if err != nil {
		return nil, redact(u, err)
	}
	return o, nil
}

// checkAddrs rejects a host:port whose port is not in 1-65535.
func checkAddrs(addrs ...string) error {
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("address %q: %w", a, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("address %q: port %s is not in 1-65535", a, port)
		}
	}
	return nil
}
