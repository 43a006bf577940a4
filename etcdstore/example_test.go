package etcdstore_test

import (
	"context"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
)

// One Store per process: all its locks share one etcd lease (the session),
// renewed by the dlock Client. The Store does not own the etcd client: close
// the dlock Client, then the Store (which revokes the session), then the
// etcd client. (Needs an etcd server, so it does not run as a test.)
func ExampleNew() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	store, err := etcdstore.New(cli, etcdstore.Options{Prefix: "locks/"}) // no I/O yet
	if err != nil {
		log.Fatal(err) // ErrInvalid: nil client, a session TTL below 2 s or not whole seconds
	}
	defer store.Close(ctx)
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	// Lock waits in etcd's FIFO, shared with `etcdctl lock locks/migrate`.
	l, err := locks.Lock(ctx, "migrate", dlock.WithWait(time.Minute))
	if err != nil {
		log.Fatal(err) // ErrNotAcquired, and why
	}
	defer l.Release(ctx)
}

// OwnerCmp guards your own etcd transaction with the lock: etcd refuses the
// write once the holding has ended, however late the request arrives.
// (Needs an etcd server.)
func ExampleStore_OwnerCmp() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	store, err := etcdstore.New(cli, etcdstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	l, err := locks.Lock(ctx, "config")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	cmp, err := store.OwnerCmp(l.Key(), l.Fence())
	if err != nil {
		log.Fatal(err) // ErrNotHeld: the holding is gone already
	}
	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut("config/value", "v2")).Commit()
	if err != nil {
		log.Fatal(err)
	}
	if !resp.Succeeded {
		log.Print("lock lost: nothing written")
	}
}
