package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"example.com/dlock"
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
  --redis URL            redis://[user:pass@]host:port/db, rediss:// for TLS   (DLOCK_REDIS)
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
	Store   dlock.Store
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
	set := 0
	for _, v := range []bool{f.redisURL != "", f.clusterURL != "", f.sentinelURL != "", len(f.redlockURLs) > 0} {
		if v {
			set++
		}
	}
	if set > 1 {
		return nil, exitWith(ExitUsage, errors.New("choose one of --redis, --redis-cluster, --redis-sentinel, --redlock"))
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
		o, err := redis.ParseClusterURL(f.clusterURL)
		if err != nil {
			return nil, "", fmt.Errorf("--redis-cluster: %w", redact(f.clusterURL, err))
		}
		return redis.NewClusterClient(o), "cluster " + strings.Join(o.Addrs, ","), nil
	case f.sentinelURL != "":
		o, err := redis.ParseFailoverURL(f.sentinelURL)
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
	o, err := redis.ParseURL(u)
	if err != nil {
		return nil, "", fmt.Errorf("--redis: %w", redact(u, err))
	}
	return redis.NewClient(o), "redis " + o.Addr, nil
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
