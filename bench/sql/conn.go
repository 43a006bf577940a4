package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// The databases the program knows.
const (
	dbPG    = "pg"
	dbMySQL = "mysql"
)

// poolSize is the connection limit of every pool a process opens for n
// goroutines: each goroutine can have a statement in flight, plus a few for
// heartbeats, listeners and the seed's data.
func poolSize(n int) int { return n + 4 }

// openPgxPool opens a pgx pool on url whose connections ctr counts, with
// all its connections opened up front (warm).
func openPgxPool(ctx context.Context, url string, ctr *counter, size int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.DialFunc = ctr.dial
	cfg.MaxConns = int32(size)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	conns := make([]*pgxpool.Conn, 0, size)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range size {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, err
		}
		conns = append(conns, c)
	}
	return pool, nil
}

// openPgSQL opens a database/sql pool on url through pgx's stdlib driver
// (the same driver as dlock's pgstore), counted by ctr.
func openPgSQL(url string, ctr *counter, size int) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = ctr.dial
	db := stdlib.OpenDB(*cfg)
	sizeDB(db, size)
	return db, nil
}

// openMySQL opens a go-sql-driver pool on dsn (go-sql-driver format),
// counted by ctr, with times in UTC, READ COMMITTED set on every connection
// when it is opened, and arguments interpolated by the driver
// (interpolateParams=true, what mysqlstore's URL opener sets: one round
// trip per statement, as JDBC's client-side prepared statements, instead
// of a server-side prepare and execute), for dlock and the peer alike.
func openMySQL(dsn string, ctr *counter, size int) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	ctr.mysql = true
	cfg.DialFunc = ctr.dial
	cfg.ParseTime = true
	cfg.InterpolateParams = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	cfg.Params["time_zone"] = "'+00:00'"
	cn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(cn)
	sizeDB(db, size)
	return db, nil
}

func sizeDB(db *sql.DB, size int) {
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size) // the default (2) would reconnect under load
	db.SetConnMaxIdleTime(0)
}

// openSQL opens a database/sql pool on the database of kind db.
func openSQL(db, url string, ctr *counter, size int) (*sql.DB, error) {
	switch db {
	case dbPG:
		return openPgSQL(url, ctr, size)
	case dbMySQL:
		return openMySQL(url, ctr, size)
	}
	return nil, fmt.Errorf("unknown database %q", db)
}

// warm opens n connections of db and returns them to the pool, so that the
// timed part does not pay for connection set-up.
func warm(ctx context.Context, db *sql.DB, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		if err := c.PingContext(ctx); err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}
