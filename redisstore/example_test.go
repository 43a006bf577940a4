package redisstore_test

import (
	"context"
	"errors"
	"log"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// The store wraps a go-redis client the caller owns; close in reverse order:
// the dlock Client, then the store, then the go-redis client. (Needs a Redis
// server, so it does not run as a test.)
func ExampleNew() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := redisstore.New(rdb, nil) // no I/O yet
	if err != nil {
		log.Fatal(err) // ErrInvalid: nil client, negative Retention
	}
	defer store.Close()
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	err = locks.Do(ctx, "invoice:42", func(ctx context.Context) error {
		return nil // the protected work; ctx ends if the lock is lost
	})
	if err != nil {
		log.Print(err) // ErrNotAcquired, ErrLost, or the function's own error
	}
}

// Opening from a URL, as the CLI's --store does, needs only this package's
// import (its init registers the redis:// schemes); Opened.Close closes the
// store and the client the opener made. (Needs a Redis server.)
func Example_open() {
	ctx := context.Background()
	opened, err := driver.Open(ctx, "redis://127.0.0.1:6379/0?prefix=app:")
	if err != nil {
		log.Fatal(err) // ErrInvalid, without the password
	}
	defer opened.Close()
	locks, err := dlock.New(opened.Store.(driver.Mutex)) // a redis:// store is a Mutex
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	l, err := locks.TryLock(ctx, "nightly")
	if errors.Is(err, dlock.ErrNotAcquired) {
		return // another process has it
	} else if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
}

// A resource kept in Redis refuses a holder that lost its lock: SetFenced
// writes only with a fence at least the last one written. (Needs a Redis
// server.)
func ExampleSetFenced() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := redisstore.New(rdb, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	err = locks.Do(ctx, "account:7", func(ctx context.Context) error {
		l, _ := dlock.LeaseFromContext(ctx)
		return redisstore.SetFenced(ctx, rdb, "account:7:balance", "120", l.Fence())
	})
	if errors.Is(err, dlock.ErrStaleFence) {
		log.Print("a later holder wrote first; nothing written")
	} else if err != nil {
		log.Print(err)
	}
}
