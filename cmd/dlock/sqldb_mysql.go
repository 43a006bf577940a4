package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"

	"github.com/go-sql-driver/mysql"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

func init() { sqlDBOpeners["mysql"] = openMySQLDB }

// openMySQLDB is the sqlDB of a mysql:// URL: mysqlstore's row lock,
// Schema and Migrate for the URL's ?table= prefix, on a database/sql pool
// of its own, configured as mysqlstore's opener configures its own
// (mysqlstore.ConnConfig: TLS, dial-timeout and every other parameter). It
// makes no network call: the pool dials on first use.
func openMySQLDB(ctx context.Context, u *url.URL) (*sqlDB, error) {
	cfg, opts, err := mysqlstore.ConnConfig(u)
	if err != nil {
		return nil, err
	}
	table := opts.Table
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql URL: %v", driver.ErrInvalid, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(sqlRowLockConns)
	db.SetMaxIdleConns(sqlRowLockConns) // database/sql keeps 2 by default: each row lock would dial
	rl := mysqlstore.RowLockOptions{Table: table, NoWait: true}
	d := &sqlDB{
		desc: "mysql " + cfg.Addr + "/" + cfg.DBName,
		rowLock: func(ctx context.Context, key string, fn func(context.Context) error) error {
			return mysqlstore.WithRowLock(ctx, db, key, rl, func(*sql.Tx) error { return fn(ctx) })
		},
		schema:  func() string { return mysqlstore.Schema(opts) },
		migrate: func(ctx context.Context) error { return mysqlRefused(mysqlstore.Migrate(ctx, db, opts)) },
		close:   db.Close,
	}
	if err := d.checkTable(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return d, nil
}

// mysqlRefused marks err as driver.ErrRefused (exit 77) when the server
// refused the user or a privilege, which retrying cannot fix: access to the
// database denied (1044), authentication failed (1045, 1698), no such
// database (1049), a command such as CREATE denied (1142, 1227).
func mysqlRefused(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && !errors.Is(err, driver.ErrRefused) {
		switch me.Number {
		case 1044, 1045, 1049, 1142, 1227, 1698:
			return fmt.Errorf("%w: %w", driver.ErrRefused, err)
		}
	}
	return err
}
