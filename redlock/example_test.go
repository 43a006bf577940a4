package redlock_test

import (
	"context"
	"errors"
	"log"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/redlock"
)

// Redlock over five independent Redis primaries (no replication between
// them), each client configured with ClientOptions. The Store does not own
// the clients: close the dlock Client, then the Store, then the clients.
// (Needs five Redis servers, so it does not run as a test.)
func ExampleNewRedis() {
	ctx := context.Background()
	var clients []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379", "10.0.0.5:6379"} {
		o := &redis.Options{Addr: addr}
		redlock.ClientOptions(o)
		c := redis.NewClient(o)
		defer c.Close()
		clients = append(clients, c)
	}
	store, err := redlock.NewRedis(clients, "", nil) // no I/O yet
	if err != nil {
		log.Fatal(err) // ErrInvalid: no nodes, too many, a nil client, a bad option
	}
	defer store.Close()
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	l, err := locks.Lock(ctx, "rebalance")
	if errors.Is(err, redlock.ErrNoQuorum) {
		log.Fatal("fewer than a majority of nodes answered: ", err)
	} else if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	// Fencing: l.Fence() is 0 when Fencing() is false; check before relying on it.
	_ = store.Fencing()
}

// The same store from a URL, as the CLI's --store opens it.
func ExampleParseURL() {
	nodes, prefix, opts, err := redlock.ParseURL("redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379?node-timeout=30ms")
	if err != nil {
		log.Fatal(err) // ErrInvalid, without the password
	}
	var clients []redis.UniversalClient
	for _, o := range nodes { // ClientOptions already applied
		c := redis.NewClient(o)
		defer c.Close()
		clients = append(clients, c)
	}
	store, err := redlock.NewRedis(clients, prefix, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
}
