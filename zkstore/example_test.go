package zkstore_test

import (
	"context"
	"log"
	"time"

	"example.com/dlock"
	"example.com/dlock/zkstore"
)

// Dial connects, waits for a session and returns a Store that owns the
// connection: all its locks live in that session. Close the dlock Client,
// then the Store (which closes the connection and so frees its lock nodes).
// A Curator InterProcessMutex on /locks/orders takes the same lock.
// (Needs a ZooKeeper server, so it does not run as a test.)
func ExampleDial() {
	ctx := context.Background()
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := zkstore.Dial(dialCtx, []string{"127.0.0.1:2181"}, zkstore.Options{Root: "/locks"})
	if err != nil {
		log.Fatal(err) // ErrInvalid for bad options, else the connection's error
	}
	defer store.Close()
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	// Lock waits in Curator's queue, watching only its predecessor.
	err = locks.Do(ctx, "orders", func(ctx context.Context) error {
		return nil // the protected work; ctx ends if the session is lost
	}, dlock.WithWait(time.Minute))
	if err != nil {
		log.Print(err)
	}
}
