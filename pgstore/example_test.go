package pgstore_test

import (
	"context"
	"errors"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// The lease table: per-key leases on the database clock, through any pooler.
// Run Migrate once (or have a DBA run Schema's DDL). The Store does not own
// the pool: close the dlock Client, then the Store, then the pool. (Needs a
// PostgreSQL server, so it does not run as a test.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app:secret@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool, pgstore.Options{}); err != nil {
		log.Fatal(err) // ErrRefused: no CREATE privilege
	}
	store, err := pgstore.New(pool, pgstore.Options{}) // no I/O
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	err = locks.Do(ctx, "invoice:42", func(ctx context.Context) error {
		return nil // the protected work; ctx ends if the lease is lost
	})
	if err != nil {
		log.Print(err)
	}
}

// The session lock: advisory locks on connections pinned from the pool,
// waiting in PostgreSQL's own queue. It needs a direct connection or a
// pooler in session mode (ErrSharedSession otherwise). (Needs a server.)
func ExampleNewSession() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app:secret@127.0.0.1:5432/app?pool_max_conns=10")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.NewSession(pool, pgstore.SessionOptions{MaxConns: 4})
	if err != nil {
		log.Fatal(err) // ErrInvalid: MaxConns not below the pool's
	}
	defer store.Close(ctx)
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	l, err := locks.Lock(ctx, "nightly", dlock.WithWait(0)) // one try
	if errors.Is(err, dlock.ErrNotAcquired) {
		return // another process runs it
	} else if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
}

// The row lock: the lock and the work commit or roll back together, in the
// caller's transaction. (Needs a server.)
func ExampleWithRowLock() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app:secret@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	err = pgstore.WithRowLock(ctx, pool, "account:7", pgstore.RowLockOptions{NoWait: true}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 7")
		return err
	})
	var ce *driver.ContendedError
	switch {
	case errors.As(err, &ce):
		log.Print("another transaction holds the row; nothing ran")
	case err != nil:
		log.Print(err) // fn's error (rolled back), or a commit of unknown outcome
	}
}
