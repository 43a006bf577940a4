package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/driver"
)

func init() { subcommands = append(subcommands, newInventoryCmd) }

func newInventoryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inventory",
		Short: "The articles' stock service, one endpoint per lock strategy",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newInventoryServeCmd())
	return cmd
}

type inventoryServeFlags struct {
	store      storeFlags
	host       string
	port       int
	name       string
	allowCrash bool
}

func newInventoryServeCmd() *cobra.Command {
	var f inventoryServeFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one instance of the stock service (run two, like the articles' ports 5000 and 5010)",
		Long: `Runs one instance of the source articles' stock service over Redis. Start
several on different ports against the same Redis and point any load tool at
them:

  POST /buy/{strategy}   nolock local v1 v2 v3 v4 v5 redlock dlock
                         dlock-commit (dlock, with the stock read with the
                         grant and written by the release)
                         etcd, zookeeper, sql-lease (dlock over the lock
                         store given by --store etcd://, zk://, postgres://
                         or mysql://; the stock stays in Redis)
                         sql-for-update (--store postgres:// or mysql://:
                         SELECT ... FOR UPDATE NOWAIT, refuses when locked)
                         query: work=D (pause between read and write),
                         lease=D (v2-v5, redlock, dlock, dlock-commit),
                         stall=D (pause before release; v3: between its
                         check and delete)
                         200 sold, 410 out of stock, 423 could not get lock
  POST /reset?stock=100  set the stock, delete every lock
  GET  /stock            {"stock": N}

The stock is ProductStock_10000; v1-v5 lock DistributedLock_10000, redlock
locks redlock:10000 on the --redlock nodes (default: the --redis server).
With --store naming a lock store, that store's strategy (etcd for
etcd://, zookeeper for zk://, sql-lease for postgres://, postgresql:// and
mysql://) locks DistributedLock_10000 there with dlock (on etcd, where
etcdctl lock PREFIX/DistributedLock_10000 queues too) and writes the stock
in Redis (--redis, default 127.0.0.1:6379) with the lock's fence. On an SQL
--store, sql-for-update sells inside a transaction holding the row
DistributedLock_10000 of the store's rows table with SELECT ... FOR UPDATE
NOWAIT: a request that finds it locked gets 423 at once.

` + storeFlagsHelp,
		Example: `  dlock inventory serve --port 5000 --redis redis://127.0.0.1:6379 &
  dlock inventory serve --port 5010 --redis redis://127.0.0.1:6379 &
  curl -X POST localhost:5000/reset
  seq 100 | xargs -P100 -I{} curl -s -X POST localhost:5000/buy/v1 ; curl localhost:5010/stock`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runInventoryServe(cmd, &f) },
	}
	f.store.register(cmd)
	cmd.Flags().StringVar(&f.host, "host", "127.0.0.1", "address to listen on")
	cmd.Flags().IntVar(&f.port, "port", 5000, "port to listen on (0: any free port)")
	cmd.Flags().StringVar(&f.name, "name", "", "instance name in answers (default host:port)")
	cmd.Flags().BoolVar(&f.allowCrash, "allow-crash", false, "honour crash=1: SIGKILL this process inside the critical section")
	_ = cmd.Flags().MarkHidden("allow-crash")
	return cmd
}

func runInventoryServe(cmd *cobra.Command, f *inventoryServeFlags) error {
	if f.port < 0 || f.port > 65535 {
		return exitWith(ExitUsage, fmt.Errorf("--port %d: want 0-65535", f.port))
	}
	primary, nodes, _, err := inventoryClients(f.store.withoutLockStore())
	if err != nil {
		return err
	}
	defer closeClients(append(nodes, primary))
	lst, err := openLockStore(cmd.Context(), &f.store)
	if err != nil {
		return err
	}
	var lockStore driver.Mutex
	if lst != nil {
		defer lst.Close()
		lockStore = lst.Store
	}
	rl, err := rowLockerOf(cmd.Context(), lst, f.store.lockStoreURL())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return exitWith(ExitUsage, err)
	}
	name := f.name
	if name == "" {
		name = ln.Addr().String()
	}
	svc, err := inventory.New(inventory.Config{Redis: primary, RedlockNodes: nodes, Prefix: f.store.prefix,
		Name: name, AllowCrash: f.allowCrash, LockStore: lockStore, LockStoreStrategy: f.store.lockStoreStrategy(), RowLocker: rl})
	if err != nil {
		return err
	}
	defer svc.Close()
	if err := svc.Ping(cmd.Context()); err != nil {
		return exitWith(ExitUnavailable, err)
	}
	return inventory.Serve(cmd.Context(), ln, svc.Handler(), cmd.OutOrStdout())
}

// lockStoreURL returns --store when it names a store of a store strategy
// (etcd://, zk://, postgres://, postgresql://, mysql://: the lock store of
// the inventory's strategy of that name), else "".
func (f *storeFlags) lockStoreURL() string {
	if inventory.StoreStrategy(schemeOf(f.storeURL)) != "" {
		return f.storeURL
	}
	return ""
}

// lockStoreStrategy is the name of the store strategy of f's --store, or "".
func (f *storeFlags) lockStoreStrategy() string {
	return inventory.StoreStrategy(schemeOf(f.lockStoreURL()))
}

// withoutLockStore is f without a lock store's --store: the flags that
// choose the Redis the inventory keeps its stock in.
func (f *storeFlags) withoutLockStore() *storeFlags {
	c := *f
	if c.lockStoreURL() != "" {
		c.storeURL = ""
	}
	return &c
}

// openLockStore opens the store of f's lock store --store and checks that
// it answers (see connect); nil, nil when --store names no such store. A
// store with a connection pool is asked for room for the sql-for-update
// strategy's transactions (sqlRowLockConns), which run on it. The caller
// closes it.
func openLockStore(ctx context.Context, f *storeFlags) (*openedStore, error) {
	u := f.lockStoreURL()
	if u == "" {
		return nil, nil
	}
	ef := storeFlags{storeURL: u}
	return ef.connect(driver.WithOpenHints(ctx, driver.OpenHints{Conns: sqlRowLockConns}))
}

// inventoryClients opens the main Redis client (--redis, --redis-cluster,
// --redis-sentinel, or a redis:// or rediss:// --store), described by desc,
// and one client per --redlock URL. The caller closes them. The inventory
// service runs the articles' Redis strategies, so any other store is a usage
// error, as are bad URLs (exitError with ExitUsage).
func inventoryClients(f *storeFlags) (primary redis.UniversalClient, nodes []redis.UniversalClient, desc string, err error) {
	primary, desc, err = f.redisClient()
	if err != nil {
		return nil, nil, "", exitWith(ExitUsage, err)
	}
	for _, u := range f.redlockURLs {
		o, err := parseRedisURL(u)
		if err != nil {
			closeClients(append(nodes, primary))
			return nil, nil, "", exitWith(ExitUsage, fmt.Errorf("--redlock: %w", err))
		}
		nodes = append(nodes, redis.NewClient(o))
	}
	return primary, nodes, desc, nil
}

// redisClient is the one Redis client the flags name (the Redlock nodes
// aside), default redis://127.0.0.1:6379.
func (f *storeFlags) redisClient() (redis.UniversalClient, string, error) {
	if n := len(nonEmpty(f.storeURL, f.redisURL, f.clusterURL, f.sentinelURL)); n > 1 {
		return nil, "", errors.New("choose one of --store, --redis, --redis-cluster, --redis-sentinel")
	}
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
	u, flag := f.redisURL, "--redis"
	if f.storeURL != "" {
		u, flag = f.storeURL, "--store"
		if s := schemeOf(u); s != "redis" && s != "rediss" {
			return nil, "", fmt.Errorf("--store %s://...: the inventory service runs the articles' Redis strategies and needs a redis:// or rediss:// URL (or --redis-cluster, --redis-sentinel), or the URL of a lock store for its store strategies (etcd://, zk://, postgres://, postgresql://, mysql://)", s)
		}
	}
	if u == "" {
		u = defaultStore
	}
	o, err := parseRedisURL(u)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	return redis.NewClient(o), "redis " + o.Addr, nil
}

// nonEmpty returns the non-empty strings of ss.
func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func closeClients(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}
