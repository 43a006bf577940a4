package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"example.com/dlock/driver"
	// The stores the CLI can open by URL register their schemes here.
	_ "example.com/dlock/etcdstore"
	_ "example.com/dlock/mysqlstore"
	_ "example.com/dlock/pgstore"
	_ "example.com/dlock/redisstore"
	_ "example.com/dlock/redlock"
	_ "example.com/dlock/zkstore"
)

// storeFlags selects the lock store. Every subcommand that talks to a store
// registers them; each flag falls back to an environment variable.
type storeFlags struct {
	storeURL    string   // --store, DLOCK_STORE
	redisURL    string   // --redis, DLOCK_REDIS
	clusterURL  string   // --redis-cluster, DLOCK_REDIS_CLUSTER
	sentinelURL string   // --redis-sentinel, DLOCK_REDIS_SENTINEL
	redlockURLs []string // --redlock (repeatable or comma-separated), DLOCK_REDLOCK
	prefix      string   // --prefix, DLOCK_PREFIX; "" = the store's default
}

const storeFlagsHelp = `Store selection (one of; flags override the environment):
  --store URL            any registered store by URL                          (DLOCK_STORE)
                           redis://[user:pass@]host:port[/db]   rediss:// for TLS
                           redis+cluster://[user:pass@]host:port,host:port,...
                           redis+sentinel://[user:pass@]host:port,host:port/MASTER[?db=N]
                           redlock://[user:pass@]host:port,host:port,host:port
                           etcd://[user:pass@]host:port[,host:port...][/PREFIX][?session-ttl=10s]
                             etcds:// for TLS [&cacert=CA.pem&cert=CLIENT.pem&key=CLIENT-KEY.pem]
                           zk://[user:pass@]host:port[,host:port...][/PATH][?session-timeout=4s&acl=creator]
                           postgres://user:pass@host:port/DB[?table=dlock&mode=lease|session&sslmode=disable]
                             (or postgresql://; apply the schema first: dlock schema --apply)
                           mysql://user:pass@host:port/DB[?table=dlock&mode=lease|session&tls=true&cacert=CA.pem]
                         query: ?prefix=P (key prefix of lock keys; etcd: the path;
                         SQL: none, ?table=T names the tables)
  Aliases, kept for existing scripts (each builds the equivalent --store URL):
  --redis URL            redis://[user:pass@]host:port/db, rediss:// for TLS;
                         a bare host:port means redis://host:port          (DLOCK_REDIS)
  --redis-cluster URL    redis://host:port?addr=host2:port2&addr=...          (DLOCK_REDIS_CLUSTER)
  --redis-sentinel URL   redis://sentinel:port?master_name=NAME&addr=...      (DLOCK_REDIS_SENTINEL)
  --redlock URL,URL,...  independent Redis primaries for Redlock              (DLOCK_REDLOCK)
  --prefix P             key prefix, added to the URL as ?prefix=P            (DLOCK_PREFIX)
Default: redis://127.0.0.1:6379`

// defaultStore is the store used when none is selected.
const defaultStore = "redis://127.0.0.1:6379"

func (f *storeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.storeURL, "store", os.Getenv("DLOCK_STORE"), "store URL (redis://, rediss://, redis+cluster://, redis+sentinel://, redlock://, etcd://, etcds://, zk://, postgres://, mysql://)")
	fl.StringVar(&f.redisURL, "redis", os.Getenv("DLOCK_REDIS"), "Redis URL (redis:// or rediss://); alias of --store")
	fl.StringVar(&f.clusterURL, "redis-cluster", os.Getenv("DLOCK_REDIS_CLUSTER"), "Redis Cluster URL; alias of --store redis+cluster://")
	fl.StringVar(&f.sentinelURL, "redis-sentinel", os.Getenv("DLOCK_REDIS_SENTINEL"), "Redis Sentinel URL with master_name; alias of --store redis+sentinel://")
	var redlock []string
	if env := os.Getenv("DLOCK_REDLOCK"); env != "" {
		redlock = strings.Split(env, ",")
	}
	fl.StringSliceVar(&f.redlockURLs, "redlock", redlock, "Redis URLs of independent primaries for Redlock (repeat or comma-separate); alias of --store redlock://")
	fl.StringVar(&f.prefix, "prefix", os.Getenv("DLOCK_PREFIX"), "key prefix of lock keys (default: the store's; dlock: on Redis; the path on etcd; not on SQL: ?table=)")
}

// openedStore is a store opened from a URL, which the CLI owns.
type openedStore struct {
	Store driver.Mutex
	Desc  string // for messages; never contains a password
	close func() error
}

// Close releases what the store's opener created (clients, subscriptions).
func (o *openedStore) Close() error {
	if o.close == nil {
		return nil
	}
	return o.close()
}

// url returns the URL of the selected store: --store as given, or the URL
// an alias flag stands for, with --prefix added. More than one store
// selected, or an alias that does not parse, is an exitError with ExitUsage
// whose message never contains a password.
func (f *storeFlags) url() (string, error) {
	if err := f.checkOneStore(); err != nil {
		return "", err
	}
	var (
		u   string
		err error
	)
	switch {
	case f.storeURL != "":
		u, err = schemeless(f.storeURL)
	case len(f.redlockURLs) > 0:
		u, err = redlockAlias(f.redlockURLs)
	case f.clusterURL != "":
		u, err = clusterAlias(f.clusterURL)
	case f.sentinelURL != "":
		u, err = sentinelAlias(f.sentinelURL)
	case f.redisURL != "":
		u, err = redisAlias(f.redisURL)
	default:
		u = defaultStore
	}
	if err != nil {
		return "", exitWith(ExitUsage, err)
	}
	return withPrefix(u, f.prefix)
}

// otherStorePorts are the default ports of the stores other than Redis: a
// bare host:port on one of them is more likely a store URL without its
// scheme than a Redis server.
var otherStorePorts = map[string]string{"2379": "etcd", "2181": "zk", "5432": "postgres", "3306": "mysql", "26379": "redis+sentinel"}

// schemeless is --store as given, or for a bare host:port (no scheme, as
// redis-cli and --redis take it) redis://host:port: Redis is the default
// store. On the default port of another store it is a usage error that
// names the URL to write instead.
func schemeless(raw string) (string, error) {
	if strings.Contains(raw, "://") {
		return raw, nil
	}
	hostPort := raw[strings.LastIndex(raw, "@")+1:] // user:password@ as redis-cli -u takes it
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || strings.ContainsAny(hostPort, "/?") {
		return raw, nil // not a host:port: driver.Open reports it
	}
	if scheme, ok := otherStorePorts[port]; ok {
		return "", fmt.Errorf("--store %s: give the store's scheme: port %s is %s's (%s://%s), a Redis server needs redis://%s", hostPort, port, scheme, scheme, hostPort, hostPort)
	}
	return "redis://" + raw, nil
}

// withPrefix adds ?prefix=P to u unless P is empty or u names a prefix
// already (then the two must agree). On etcd:// URLs, whose prefix is the
// path, it sets the path to /P instead; on the SQL URLs
// (postgres://, postgresql://, mysql://), whose path is the database, a
// prefix is a usage error (their ?table= names the tables).
func withPrefix(raw, prefix string) (string, error) {
	if prefix == "" {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", exitWith(ExitUsage, fmt.Errorf("store URL: %v", redact(raw, err)))
	}
	switch strings.ToLower(u.Scheme) {
	case "etcd", "etcds": // etcd takes its prefix as the URL's path
		have := strings.Trim(u.Path, "/")
		switch {
		case have == "":
			u.Path = "/" + strings.Trim(prefix, "/")
			return u.String(), nil
		case have != strings.Trim(prefix, "/"):
			return "", exitWith(ExitUsage, fmt.Errorf("--prefix %q disagrees with the %s URL's path /%s", prefix, u.Scheme, have))
		}
		return raw, nil
	case "postgres", "postgresql", "mysql": // the path is the database; names are rows of a table
		return "", exitWith(ExitUsage, fmt.Errorf("--prefix: the %s store keeps lock names as rows of one table; choose the table's prefix with ?table=NAME in the URL", u.Scheme))
	}
	q := u.Query()
	if have, ok := q["prefix"]; ok {
		if len(have) != 1 || have[0] != prefix {
			return "", exitWith(ExitUsage, fmt.Errorf("--prefix %q disagrees with the store URL's prefix=%q", prefix, strings.Join(have, ",")))
		}
		return raw, nil
	}
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// open opens the selected store with driver.Open. It makes no network call
// of its own (an opener may); a bad URL, an unknown scheme or conflicting
// flags return an exitError with ExitUsage.
func (f *storeFlags) open(ctx context.Context) (*openedStore, error) {
	raw, err := f.url()
	if err != nil {
		return nil, err
	}
	o, err := driver.Open(ctx, raw)
	if err != nil {
		err = redact(raw, err)
		if errors.Is(err, driver.ErrInvalid) {
			return nil, exitWith(ExitUsage, plain(err))
		}
		var ee *exitError
		if err := exitFor(err); errors.As(err, &ee) && ee.code != ExitUnavailable {
			return nil, err
		}
		return nil, exitWith(ExitUnavailable, unreachable(addressOf(raw), err))
	}
	desc := o.Describe
	if desc == "" {
		desc = schemeOf(raw) + " store"
	}
	m, ok := o.Store.(driver.Mutex)
	if !ok {
		_ = o.Close()
		return nil, exitWith(ExitUsage, fmt.Errorf("%s offers no lock (driver.Mutex)", desc))
	}
	return &openedStore{Store: m, Desc: desc, close: o.Close}, nil
}

// openWithin is open, its connecting bounded by d unless the URL sets its
// own dial-timeout, so that an unreachable store of any kind is reported
// within the same bound (etcd's default dial timeout is 5 s, ZooKeeper's
// 10 s).
func (f *storeFlags) openWithin(ctx context.Context, d time.Duration) (*openedStore, error) {
	if raw, err := f.url(); err == nil {
		if u, err := url.Parse(raw); err == nil && u.Query().Has("dial-timeout") {
			return f.open(ctx)
		}
	}
	octx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f.open(octx)
}

// schemeOf is raw's scheme, for messages.
func schemeOf(raw string) string {
	s, _, _ := strings.Cut(raw, "://")
	return s
}

// checkOneStore fails with ExitUsage if more than one store is selected,
// naming the environment variable behind each selection that came from one:
// a variable set long ago is the usual surprise.
func (f *storeFlags) checkOneStore() error {
	var chosen, fromEnv []string
	for _, c := range []struct {
		flag, env, val string
	}{
		{"--store", "DLOCK_STORE", f.storeURL},
		{"--redis", "DLOCK_REDIS", f.redisURL},
		{"--redis-cluster", "DLOCK_REDIS_CLUSTER", f.clusterURL},
		{"--redis-sentinel", "DLOCK_REDIS_SENTINEL", f.sentinelURL},
		{"--redlock", "DLOCK_REDLOCK", strings.Join(f.redlockURLs, ",")},
	} {
		switch {
		case c.val == "":
		case os.Getenv(c.env) == c.val:
			chosen = append(chosen, fmt.Sprintf("%s (from the environment variable %s)", c.flag, c.env))
			fromEnv = append(fromEnv, fmt.Sprintf("unset %s or pass %s ''", c.env, c.flag))
		default:
			chosen = append(chosen, c.flag)
		}
	}
	if len(chosen) > 1 {
		fix := "pass only one of them"
		if len(fromEnv) > 0 {
			fix = strings.Join(fromEnv, ", and ")
		}
		return exitWith(ExitUsage, fmt.Errorf("choose one store: %s are set; %s", strings.Join(chosen, " and "), fix))
	}
	return nil
}

// redactedError is an error with a URL's user information (which may hold a
// password) cut out of its message. It deliberately does not unwrap to the
// original, whose message still has the password; it matches the sentinel
// the original matched, so that exit codes survive redaction.
type redactedError struct {
	msg      string
	sentinel error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.sentinel }

// redact removes the passwords in rawURL (its own, and those of node URLs in
// its query) from err's message: parse errors quote the whole URL, password
// included. The result still matches the driver sentinel err matched.
func redact(rawURL string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secretsOf(rawURL) {
		var did bool
		msg, did = replaceWhole(msg, s, "REDACTED")
		changed = changed || did
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg, sentinel: sentinelOf(err)}
}

// replaceWhole replaces every occurrence of s in msg that is not part of a
// longer word (no letter or digit touches it on a side where s itself
// starts or ends with one), so that a short password such as "p" is
// removed where it stands alone without mangling "tcp" around it.
func replaceWhole(msg, s, repl string) (string, bool) {
	if s == "" {
		return msg, false
	}
	alnum := func(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	var b strings.Builder
	changed := false
	for {
		i := strings.Index(msg, s)
		if i < 0 {
			b.WriteString(msg)
			return b.String(), changed
		}
		end := i + len(s)
		inWord := alnum(s[0]) && i > 0 && alnum(msg[i-1]) || alnum(s[len(s)-1]) && end < len(msg) && alnum(msg[end])
		b.WriteString(msg[:i])
		if inWord {
			b.WriteString(s)
		} else {
			b.WriteString(repl)
			changed = true
		}
		msg = msg[end:]
	}
}

// secretsOf returns the strings of rawURL that may hold a password: the
// user information of rawURL and of every URL in its query, whole and the
// password alone, raw and decoded.
func secretsOf(rawURL string) []string {
	var out []string
	add := func(userinfo string) {
		// A user name without a password is no secret (go-redis, pgx and
		// the MySQL driver all read it as the user): replacing it would
		// mangle every message that names it, such as "postgres URL" for
		// the user postgres.
		_, pw, ok := strings.Cut(userinfo, ":")
		if !ok || pw == "" {
			return
		}
		out = append(out, userinfo, pw)
		if dec, err := url.PathUnescape(pw); err == nil && dec != pw {
			out = append(out, dec)
		}
	}
	if at := strings.LastIndex(rawURL, "@"); at >= 0 {
		start := 0
		if i := strings.Index(rawURL[:at], "://"); i >= 0 {
			start = i + 3
		}
		if slash := strings.Index(rawURL[start:at], "/"); slash < 0 {
			add(rawURL[start:at])
		}
	}
	if u, err := url.Parse(rawURL); err == nil {
		if u.User != nil {
			add(u.User.String())
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				if strings.Contains(v, "@") {
					out = append(out, secretsOf(v)...)
				}
			}
		}
	}
	// Longest first, so that a password inside a user information is
	// replaced as part of it.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// sentinelOf is the first driver sentinel err matches, or nil.
func sentinelOf(err error) error {
	for _, s := range []error{driver.ErrInvalid, driver.ErrRefused, driver.ErrUnavailable, driver.ErrNotAcquired, driver.ErrNotHeld} {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}
