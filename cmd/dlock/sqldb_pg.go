package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"example.com/dlock/pgstore"
)

func init() {
	sqlDBOpeners["postgres"] = openPostgresDB
	sqlDBOpeners["postgresql"] = openPostgresDB
}

// sqlRowLockConns is the row lock pool's size when the URL sets no
// pool_max_conns: each sql-for-update request holds a connection for its
// transaction, and too small a pool turns NOWAIT's refusals into waits for
// a connection.
const sqlRowLockConns = 32

// openPostgresDB is the sqlDB of a postgres:// URL: pgstore's row lock,
// Schema and Migrate for the URL's ?table= prefix, on a pgx pool of its
// own, configured as pgstore's opener configures its own
// (pgstore.PoolConfig).
func openPostgresDB(ctx context.Context, u *url.URL) (*sqlDB, error) {
	cfg, opts, err := pgstore.PoolConfig(u)
	if err != nil {
		return nil, err
	}
	if !u.Query().Has("pool_max_conns") {
		cfg.MaxConns = sqlRowLockConns
	}
	table := opts.Table
	pool, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", err)
	}
	rl := pgstore.RowLockOptions{Table: table, NoWait: true}
	d := &sqlDB{
		desc: fmt.Sprintf("postgres %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database),
		rowLock: func(ctx context.Context, key string, fn func(context.Context) error) error {
			return pgstore.WithRowLock(ctx, pool, key, rl, func(pgx.Tx) error { return fn(ctx) })
		},
		schema:  func() string { return pgstore.Schema(opts) },
		migrate: func(ctx context.Context) error { return pgstore.Migrate(ctx, pool, opts) },
		close:   func() error { pool.Close(); return nil },
	}
	if err := d.checkTable(); err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}
