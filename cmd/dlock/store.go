package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// storeFlags selects the lock store. Every subcommand that talks to a store
// registers them; each flag falls back to an environment variable.
type storeFlags struct {
	redisURL    string   // --redis, DLOCK_REDIS
	clusterURL  string   // --redis-cluster, DLOCK_REDIS_CLUSTER
	sentinelURL string   // --redis-sentinel, DLOCK_REDIS_SENTINEL
	redlockURLs []string // --redlock (repeatable or comma-separated), DLOCK_REDLOCK
	prefix      string   // --prefix, DLOCK_PREFIX
}

const storeFlagsHelp = `Store selection (one of; flags override the environment):
  --redis URL            redis://[user:pass@]host:port/db, rediss:// for TLS;
                         a bare host:port means redis://host:port          (DLOCK_REDIS)
  --redis-cluster URL    redis://host:port?addr=host2:port2&addr=...          (DLOCK_REDIS_CLUSTER)
  --redis-sentinel URL   redis://sentinel:port?master_name=NAME&addr=...      (DLOCK_REDIS_SENTINEL)
  --redlock URL,URL,...  independent Redis primaries for Redlock              (DLOCK_REDLOCK)
Default: redis://127.0.0.1:6379`

func (f *storeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.redisURL, "redis", os.Getenv("DLOCK_REDIS"), "Redis URL (redis:// or rediss://)")
	fl.StringVar(&f.clusterURL, "redis-cluster", os.Getenv("DLOCK_REDIS_CLUSTER"), "Redis Cluster URL")
	fl.StringVar(&f.sentinelURL, "redis-sentinel", os.Getenv("DLOCK_REDIS_SENTINEL"), "Redis Sentinel URL with master_name")
	var redlock []string
	if env := os.Getenv("DLOCK_REDLOCK"); env != "" {
		redlock = strings.Split(env, ",")
	}
	fl.StringSliceVar(&f.redlockURLs, "redlock", redlock, "Redis URLs of independent primaries for Redlock (repeat or comma-separate)")
	prefix := os.Getenv("DLOCK_PREFIX")
	if prefix == "" {
		prefix = redisstore.DefaultPrefix
	}
	fl.StringVar(&f.prefix, "prefix", prefix, "key prefix of lock keys")
}

// openedStore is a store and the clients behind it, which the CLI owns.
type openedStore struct {
	Store   driver.Mutex
	Clients []redis.UniversalClient
	Desc    string // for messages; never contains a password
}

// Close closes the store's subscription and the clients.
func (o *openedStore) Close() error {
	var errs []error
	if c, ok := o.Store.(interface{ Close() error }); ok {
		errs = append(errs, c.Close())
	}
	for _, c := range o.Clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// open builds the selected store. It makes no network call; a bad URL or
// conflicting flags return an exitError with ExitUsage.
func (f *storeFlags) open() (*openedStore, error) {
	if err := f.checkOneStore(); err != nil {
		return nil, err
	}
	if len(f.redlockURLs) > 0 {
		st, err := openRedlock(f.redlockURLs, f.prefix)
		var ee *exitError
		if errors.As(err, &ee) && ee.err != nil {
			for _, u := range f.redlockURLs {
				ee.err = redact(u, ee.err)
			}
		}
		return st, err
	}
	client, desc, err := f.client()
	if err != nil {
		return nil, exitWith(ExitUsage, err)
	}
	s, err := redisstore.New(client, &redisstore.Options{Prefix: f.prefix})
	if err != nil {
		_ = client.Close()
		return nil, exitWith(ExitUsage, err)
	}
	return &openedStore{Store: s, Clients: []redis.UniversalClient{client}, Desc: desc}, nil
}

func (f *storeFlags) client() (redis.UniversalClient, string, error) {
	switch {
	case f.clusterURL != "":
		o, err := redis.ParseClusterURL(withScheme(f.clusterURL))
		if err == nil {
			err = checkAddrs(o.Addrs...)
		}
		if err != nil {
			return nil, "", fmt.Errorf("--redis-cluster: %w", redact(f.clusterURL, err))
		}
		return redis.NewClusterClient(o), "cluster " + strings.Join(o.Addrs, ","), nil
	case f.sentinelURL != "":
		o, err := redis.ParseFailoverURL(withScheme(f.sentinelURL))
		if err == nil {
			err = checkAddrs(o.SentinelAddrs...)
		}
		if err != nil {
			return nil, "", fmt.Errorf("--redis-sentinel: %w", redact(f.sentinelURL, err))
		}
		if o.MasterName == "" {
			return nil, "", errors.New("--redis-sentinel: the URL needs ?master_name=NAME")
		}
		return redis.NewFailoverClient(o), "sentinel master " + o.MasterName, nil
	}
	u := f.redisURL
	if u == "" {
		u = "redis://127.0.0.1:6379"
	}
	o, err := parseRedisURL(u)
	if err != nil {
		return nil, "", fmt.Errorf("--redis: %w", err)
	}
	return redis.NewClient(o), "redis " + o.Addr, nil
}

// checkOneStore fails with ExitUsage if more than one store is selected,
// naming the environment variable behind each selection that came from one:
// a variable set long ago is the usual surprise.
func (f *storeFlags) checkOneStore() error {
	var chosen []string
	for _, c := range []struct {
		flag, env, val string
	}{
		{"--redis", "DLOCK_REDIS", f.redisURL},
		{"--redis-cluster", "DLOCK_REDIS_CLUSTER", f.clusterURL},
		{"--redis-sentinel", "DLOCK_REDIS_SENTINEL", f.sentinelURL},
		{"--redlock", "DLOCK_REDLOCK", strings.Join(f.redlockURLs, ",")},
	} {
		switch {
		case c.val == "":
		case os.Getenv(c.env) == c.val:
			chosen = append(chosen, fmt.Sprintf("%s (from the environment variable %s)", c.flag, c.env))
		default:
			chosen = append(chosen, c.flag)
		}
	}
	if len(chosen) > 1 {
		return exitWith(ExitUsage, fmt.Errorf("choose one store: %s are set; unset the variable or pass the flag empty (e.g. --redis-cluster '')",
			strings.Join(chosen, " and ")))
	}
	return nil
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

// redactedError is a URL parse error with the URL's user information (which
// may hold a password) cut out of its message. It deliberately does not
// unwrap to the original, whose message still has the password.
type redactedError struct{ msg string }

func (e *redactedError) Error() string { return e.msg }

// redact removes rawURL's user information from err's message: parse errors
// quote the whole URL, password included.
func redact(rawURL string, err error) error {
	at := strings.LastIndex(rawURL, "@")
	if at < 0 {
		return err
	}
	start := 0
	if i := strings.Index(rawURL[:at], "://"); i >= 0 {
		start = i + 3
	}
	userinfo := rawURL[start:at]
	if userinfo == "" {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), userinfo, "REDACTED")}
}
