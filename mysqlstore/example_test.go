package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"log"

	_ "github.com/go-sql-driver/mysql"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// The lease table (MariaDB 10.5+): per-key leases on the database clock.
// Run Migrate once. The Store does not own the *sql.DB: close the dlock
// Client, then the Store, then the pool. (Needs a server, so it does not
// run as a test.)
func ExampleNew() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/app?parseTime=true&interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := mysqlstore.Migrate(ctx, db, mysqlstore.Options{}); err != nil {
		log.Fatal(err) // ErrRefused: no CREATE privilege, or MySQL (no sequences)
	}
	store, err := mysqlstore.New(db, mysqlstore.Options{}) // no I/O
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
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

// The session lock: GET_LOCK on connections pinned from the pool, waiting
// in the server's own queue. (Needs a server.)
func ExampleNewSession() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/app?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(16)
	store, err := mysqlstore.NewSession(db, mysqlstore.SessionOptions{MaxConns: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	locks, err := dlock.New(store)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	l, err := locks.TryLock(ctx, "nightly")
	if errors.Is(err, dlock.ErrNotAcquired) {
		return // another process runs it
	} else if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
}

// The row lock: the lock and the work commit or roll back together.
// (Needs a server.)
func ExampleWithRowLock() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/app?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	err = mysqlstore.WithRowLock(ctx, db, "account:7", mysqlstore.RowLockOptions{NoWait: true}, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 7")
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
