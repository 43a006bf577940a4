package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

func init() { sqlDBOpeners["mysql"] = openMySQLDB }

// openMySQLDB is the sqlDB of a mysql:// URL: mysqlstore's row lock,
// Schema and Migrate for the URL's ?table= prefix, on a database/sql pool
// of its own (go-sql-driver, the settings mysqlstore's opener uses). It
// makes no network call: the pool dials on first use.
func openMySQLDB(ctx context.Context, u *url.URL) (*sqlDB, error) {
	table, _, err := storeParams(u)
	if err != nil {
		return nil, err
	}
	opts := mysqlstore.Options{Table: table}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "3306"
	}
	if host == "" {
		return nil, fmt.Errorf("%w: mysql URL: no host (mysql://user:password@host:port/database)", driver.ErrInvalid)
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	cfg.ParseTime, cfg.InterpolateParams, cfg.Timeout = true, true, 5*time.Second
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
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
		migrate: func(ctx context.Context) error { return mysqlstore.Migrate(ctx, db, opts) },
		close:   db.Close,
	}
	if err := d.checkTable(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return d, nil
}
