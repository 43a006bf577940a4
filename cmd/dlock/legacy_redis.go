package main

// TODO(issue 14, merge of i14-redis): this file is a bridge. The Redis
// stores' own URL openers (redisstore/open.go, redlock/open.go) and their
// Lister, WaiterCounter and Doctor capabilities are written on another
// branch. Until they land, the CLI registers the same schemes here, from the
// code it had before, and wraps the store in legacyStore for those three
// capabilities. Every scheme is registered only if no store package did, so
// once the stores register theirs this file changes nothing and is to be
// deleted, with doctor_checks.go and doctor_acl.go (ported to redisstore).

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
	"example.com/dlock/redlock"
)

func init() {
	have := driver.Schemes()
	for _, s := range []string{"redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel", "redlock"} {
		if !slices.Contains(have, s) {
			driver.Register(s, openLegacy)
		}
	}
}

// openLegacy opens the Redis store a URL names. It makes no network call.
func openLegacy(_ context.Context, u *url.URL) (*driver.Opened, error) {
	q := u.Query()
	prefix := q.Get("prefix")
	q.Del("prefix")
	u2 := *u
	u2.RawQuery = q.Encode()
	base, kind, _ := strings.Cut(u.Scheme, "+")
	var (
		clients []redis.UniversalClient
		desc    string
		err     error
	)
	switch kind {
	case "":
		if u.Scheme == "redlock" {
			return openLegacyRedlock(&u2, prefix)
		}
		var o *redis.Options
		if o, err = parseRedisURL(u2.String()); err == nil {
			clients, desc = []redis.UniversalClient{redis.NewClient(o)}, "redis "+o.Addr
		}
	case "cluster":
		hosts := strings.Split(u.Host, ",")
		g := url.URL{Scheme: base, User: u.User, Host: hosts[0]}
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		g.RawQuery = q.Encode()
		var o *redis.ClusterOptions
		if o, err = redis.ParseClusterURL(g.String()); err == nil {
			if err = checkAddrs(o.Addrs...); err == nil {
				clients, desc = []redis.UniversalClient{redis.NewClusterClient(o)}, "cluster "+strings.Join(o.Addrs, ",")
			}
		}
	case "sentinel":
		hosts := strings.Split(u.Host, ",")
		g := url.URL{Scheme: base, User: u.User, Host: hosts[0], Path: "/" + q.Get("db")}
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		q.Del("db")
		q.Set("master_name", strings.Trim(u.Path, "/"))
		g.RawQuery = q.Encode()
		var o *redis.FailoverOptions
		if o, err = redis.ParseFailoverURL(g.String()); err == nil && o.MasterName == "" {
			err = errors.New("the URL needs the master's name: redis+sentinel://host:port,.../MASTER")
		}
		if err == nil {
			if err = checkAddrs(o.SentinelAddrs...); err == nil {
				clients, desc = []redis.UniversalClient{redis.NewFailoverClient(o)}, "sentinel master "+o.MasterName
			}
		}
	default:
		err = fmt.Errorf("unknown scheme %q", u.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: store URL: %w", driver.ErrInvalid, redact(u.String(), err))
	}
	s, err := redisstore.New(clients[0], &redisstore.Options{Prefix: prefix})
	if err != nil {
		_ = clients[0].Close()
		return nil, err
	}
	return legacyOpened(s, s.Close, clients, desc, prefix), nil
}

// openLegacyRedlock opens redlock://[user:pass@]h1,h2,h3 or
// redlock://?node=URL&node=URL..., one client per node.
func openLegacyRedlock(u *url.URL, prefix string) (*driver.Opened, error) {
	nodes := u.Query()["node"]
	if u.Host != "" {
		for _, h := range strings.Split(u.Host, ",") {
			n := url.URL{Scheme: "redis", User: u.User, Host: h}
			nodes = append(nodes, n.String())
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: store URL: redlock:// needs nodes: redlock://host:port,host:port,host:port", driver.ErrInvalid)
	}
	var clients []redis.UniversalClient
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	var addrs []string
	for _, n := range nodes {
		o, err := parseRedisURL(n)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%w: store URL: redlock node: %w", driver.ErrInvalid, err)
		}
		redlock.ClientOptions(o)
		clients = append(clients, redis.NewClient(o))
		addrs = append(addrs, o.Addr)
	}
	s, err := redlock.NewRedis(clients, prefix, nil)
	if err != nil {
		closeAll()
		return nil, err
	}
	desc := fmt.Sprintf("redlock over %d nodes %s", len(addrs), strings.Join(addrs, ","))
	if len(addrs) < 3 {
		desc += " (fewer than 3 nodes tolerate no failure)"
	}
	return legacyOpened(s, s.Close, clients, desc, prefix), nil
}

func legacyOpened(s driver.Mutex, closeStore func() error, clients []redis.UniversalClient, desc, prefix string) *driver.Opened {
	if prefix == "" {
		prefix = redisstore.DefaultPrefix
	}
	ls := &legacyStore{Mutex: s, clients: clients, prefix: prefix}
	return &driver.Opened{Store: ls, Describe: desc, Close: func() error {
		errs := []error{closeStore()}
		for _, c := range clients {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}}
}

// legacyStore adds the CLI's former Redis-specific list, waiter count and
// doctor code to a Redis store, as capabilities. Every other capability is
// the wrapped store's, found through Unwrap.
type legacyStore struct {
	driver.Mutex
	clients []redis.UniversalClient // one, or one per Redlock node
	prefix  string
}

// Unwrap returns the Redis store.
func (s *legacyStore) Unwrap() driver.Mutex { return s.Mutex }

// Waiters counts the subscribers of key's release channel (redisstore's
// Waiters; for Redlock the largest count of any node).
func (s *legacyStore) Waiters(ctx context.Context, key string) (int, error) {
	if w, ok := s.Mutex.(interface {
		Waiters(context.Context, string) (int64, error)
	}); ok {
		n, err := w.Waiters(ctx, key)
		return int(n), err
	}
	return 0, driver.Unsupported("waiters", "this store cannot count them")
}

// List scans every server (every primary of a Cluster, every Redlock node)
// for lock keys under prefix and reports each as the store's Inspect sees
// it. A Redlock store lists while a majority of its nodes answer.
func (s *legacyStore) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	in, ok := driver.As[driver.Inspector](s.Mutex)
	if !ok {
		return driver.Unsupported("list", "the store cannot inspect keys")
	}
	match := escapeGlob(s.prefix+"{"+prefix) + "*}"
	seen := map[string]bool{}
	var mu sync.Mutex
	add := func(name string) {
		mu.Lock()
		seen[name] = true
		mu.Unlock()
	}
	var errs []error
	for _, c := range s.clients {
		var err error
		if cc, ok := c.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				return scanLocks(ctx, n, s.prefix, match, add)
			})
		} else {
			err = scanLocks(ctx, c, s.prefix, match, add)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if majorityFailed(len(errs), len(s.clients)) {
		return fmt.Errorf("%w: list: scan: %w", driver.ErrUnavailable, errors.Join(errs...))
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		info, err := in.Inspect(ctx, n)
		if errors.Is(err, driver.ErrRefused) {
			continue // a value that is not a lock
		}
		if err != nil {
			return err
		}
		if !fn(n, info) {
			return nil
		}
	}
	return nil
}

// majorityFailed reports whether failures of total servers leave no
// majority answering: a Redlock store works while a majority of its nodes
// answer, any other store (one client) needs that client.
func majorityFailed(failures, total int) bool {
	return failures > 0 && failures >= (total+1)/2
}

// scanLocks calls add with the name of every lock on one server (a string;
// release records PREFIX{K}:released:<token>, and the fence counters of
// earlier versions, do not end in "}" and so do not match).
func scanLocks(ctx context.Context, c redis.Cmdable, prefix, match string, add func(string)) error {
	it := c.ScanType(ctx, 0, match, 500, "string").Iterator()
	for it.Next(ctx) {
		k := it.Val()
		if len(k) < len(prefix)+2 || !strings.HasPrefix(k, prefix+"{") || !strings.HasSuffix(k, "}") {
			continue
		}
		add(k[len(prefix)+1 : len(k)-1])
	}
	return it.Err()
}

// escapeGlob quotes the glob metacharacters of a literal prefix.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Doctor runs the former CLI checks on every server (every primary of a
// Cluster, every Redlock node). With more than one server each check's name
// starts with the server's address. A server that does not answer gets one
// FAIL "connection" check and no other.
func (s *legacyStore) Doctor(ctx context.Context, _ time.Duration) []driver.Check {
	var (
		out []driver.Check
		mu  sync.Mutex
	)
	multi := len(s.clients) > 1
	add := func(node string, cs []check) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			name := c.Name
			if multi {
				name = node + " " + name
			}
			out = append(out, toDriverCheck(name, c))
		}
	}
	for _, c := range s.clients {
		if cc, ok := c.(*redis.ClusterClient); ok {
			multi = true
			acl := aclCheck(ctx, c, s.prefix)
			err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				add(n.Options().Addr, nodeOrUnreachable(ctx, n, func() []check { return append(nodeChecks(ctx, n), acl) }))
				return nil
			})
			if err != nil {
				add("cluster", []check{{Name: "cluster", Status: statusFail, Detail: "cannot reach every primary: " + oneLine(err),
					Fix: "check the cluster's health (CLUSTER INFO)"}})
			}
			continue
		}
		add(nodeName(c), nodeOrUnreachable(ctx, c, func() []check { return append(nodeChecks(ctx, c), aclCheck(ctx, c, s.prefix)) }))
	}
	slices.SortStableFunc(out, func(a, b driver.Check) int { return strings.Compare(nodeOf(a.Name, multi), nodeOf(b.Name, multi)) })
	return out
}

// nodeOf is the server part of a check's name ("" for a single server).
func nodeOf(name string, multi bool) string {
	if !multi {
		return ""
	}
	n, _, _ := strings.Cut(name, " ")
	return n
}

func toDriverCheck(name string, c check) driver.Check {
	st := map[string]driver.Status{statusOK: driver.OK, statusWarn: driver.Warn, statusFail: driver.Fail}[c.Status]
	d := c.Detail
	if c.Fix != "" && c.Status != statusOK {
		d += "; fix: " + c.Fix
	}
	return driver.Check{Name: name, Status: st, Detail: d}
}

// nodeOrUnreachable runs checks if c answers a PING, and otherwise returns
// the single FAIL line that says it does not.
func nodeOrUnreachable(ctx context.Context, c redis.Cmdable, checks func() []check) []check {
	if err := c.Ping(ctx).Err(); err != nil {
		return []check{{Name: "connection", Status: statusFail, Detail: "does not answer: " + oneLine(err),
			Fix: "start the server or fix its address; nothing else could be checked"}}
	}
	return checks()
}

// nodeName labels a non-cluster client: its address, or "sentinel" for a
// Sentinel client (whose primary may move).
func nodeName(c redis.UniversalClient) string {
	if rc, ok := c.(*redis.Client); ok {
		return rc.Options().Addr
	}
	return "sentinel"
}
