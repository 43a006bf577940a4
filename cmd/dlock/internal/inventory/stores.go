package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"example.com/dlock"
)

// The store strategies: dlock over a lock store other than the stock's
// Redis, given by a store URL (Config.LockStore), and the seed's
// SELECT … FOR UPDATE NOWAIT on an SQL database (Config.RowLocker). They are
// not in Strategies: each runs only when its store is given. The stock
// always stays in Redis.
const (
	// EtcdStrategy locks over an etcd:// store; its fence is the lock
	// key's CreateRevision.
	EtcdStrategy = "etcd"
	// ZooKeeperStrategy locks over a zk:// store; its fence comes from the
	// lock node.
	ZooKeeperStrategy = "zookeeper"
	// SQLLeaseStrategy locks over a postgres://, postgresql:// or mysql://
	// store (the lease table; on mysql:// with ?mode=session, GET_LOCK);
	// its fence comes from the database's sequence.
	SQLLeaseStrategy = "sql-lease"
	// SQLForUpdateStrategy is the articles' database lock: the sale runs inside a
	// transaction that holds `SELECT … FOR UPDATE NOWAIT` on the lock's
	// row; a request that finds the row locked is refused at once.
	SQLForUpdateStrategy = "sql-for-update"
)

// storeStrategies maps store URL schemes to the strategy locking over them.
var storeStrategies = map[string]string{
	"etcd":       EtcdStrategy,
	"etcds":      EtcdStrategy,
	"zk":         ZooKeeperStrategy,
	"postgres":   SQLLeaseStrategy,
	"postgresql": SQLLeaseStrategy,
	"mysql":      SQLLeaseStrategy,
}

// StoreStrategy returns the name of the strategy that locks with dlock
// over a store of the URL scheme (case-insensitive), or "" for a scheme
// that has none (the Redis schemes, whose stores the other strategies use,
// and unknown ones).
func StoreStrategy(scheme string) string { return storeStrategies[strings.ToLower(scheme)] }

// isLockStoreStrategy reports whether name is the strategy of some store
// scheme (sql-for-update is not: it needs a RowLocker, not a store).
func isLockStoreStrategy(name string) bool {
	for _, s := range storeStrategies {
		if s == name {
			return true
		}
	}
	return false
}

// IsSQLScheme reports whether the URL scheme names an SQL database, where
// SQLForUpdateStrategy can run as well as SQLLeaseStrategy.
func IsSQLScheme(scheme string) bool { return StoreStrategy(scheme) == SQLLeaseStrategy }

// StoreStrategies lists every store strategy name, sorted.
func StoreStrategies() []string {
	out := []string{SQLForUpdateStrategy}
	for _, s := range storeStrategies {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// RowLocker runs a function while holding a database row lock, the seed's
// SELECT … FOR UPDATE: the lock lives in a transaction that commits (or
// rolls back) when fn returns, so a holder that dies loses it with its
// connection. The CLI adapts each SQL store's WithRowLock to it.
type RowLocker interface {
	// WithRowLock locks key's row without waiting (NOWAIT) and runs fn in
	// the transaction holding it. A row locked by someone else returns an
	// error matching dlock.ErrNotAcquired without running fn; fn's error
	// rolls the transaction back and is returned.
	WithRowLock(ctx context.Context, key string, fn func(ctx context.Context) error) error
}

// storeFenceKey is where the stock's last writer's fence is kept for a
// store strategy: fences of different lock services are not comparable
// (etcd revisions, ZooKeeper zxids, SQL sequences, Redis counters).
func storeFenceKey(strategy string) string { return "ProductStock_10000:" + strategy + "-fence" }

// buyStore is buyDlock with the lock taken from the lock store
// (Config.LockStore), the same code for every kind of store: the lock's
// fence, which only grows, guards the stock's write as in buyDlock. It
// answers an error when the service's store is of another kind.
func (s *Service) buyStore(name string) strategyFunc {
	return func(ctx context.Context, p Params) Answer {
		if s.lockStore == nil || name != s.cfg.LockStoreStrategy {
			return failed(fmt.Errorf("the %s strategy needs %s", name, needs(name)))
		}
		return s.buyFenced(ctx, p, s.lockStore, storeFenceKey(name))
	}
}

// buyForUpdate is the seed's SELECT … FOR UPDATE NOWAIT: the sale runs
// inside the row lock's transaction; a request that finds the row locked
// is refused at once ("could not get lock"), where sql-lease's dlock
// waits. The stock is in Redis and written while the row lock is held; the
// transaction ends after the write (the seed keeps the stock in the same
// database and so commits the two together).
func (s *Service) buyForUpdate(ctx context.Context, p Params) Answer {
	if s.cfg.RowLocker == nil {
		return failed(fmt.Errorf("the %s strategy needs %s", SQLForUpdateStrategy, needs(SQLForUpdateStrategy)))
	}
	var a Answer
	err := s.cfg.RowLocker.WithRowLock(ctx, LockKey, func(ctx context.Context) error {
		a = s.decrement(ctx, p, nil)
		_ = sleep(ctx, p.Stall)
		return nil
	})
	switch {
	case err == nil:
		return a
	case errors.Is(err, dlock.ErrNotAcquired) && ctx.Err() == nil:
		return lockFailed()
	case a.Outcome == Sold: // the write landed; the commit (of nothing) failed
		a.Message = "sold, but the row lock's transaction failed: " + err.Error()
		return a
	}
	return failed(err)
}

// needs says which store a store strategy needs, for errors.
func needs(strategy string) string {
	switch strategy {
	case EtcdStrategy:
		return "an etcd store: --store etcd://HOST:PORT/PREFIX"
	case ZooKeeperStrategy:
		return "a ZooKeeper store: --store zk://HOST:PORT[,HOST:PORT...]/PATH"
	}
	return "an SQL store: --store postgres://USER:PASS@HOST:PORT/DB or mysql://USER:PASS@HOST:PORT/DB"
}

// NeedsStore says, for a strategy that is not available without a store,
// which --store it needs; "" for the strategies that always run.
func NeedsStore(strategy string) string {
	if slices.Contains(StoreStrategies(), strategy) {
		return needs(strategy)
	}
	return ""
}
