package pgstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

func init() {
	driver.Register("postgres", Open)
	driver.Register("postgresql", Open)
}

// The URL parameters Open reads itself; every other parameter (sslmode,
// connect_timeout, application_name, pool_max_conns...) goes to pgx.
const (
	paramTable   = "table"
	paramMode    = "mode"
	paramMigrate = "migrate"
	paramSweep   = "sweep"
)

// Open opens a lease-table Store from a URL
// postgres://user:password@host:port/database?table=dlock&mode=lease, as
// pgx reads it (postgresql:// too). Its own parameters: table (the prefix,
// Options.Table), mode (lease, the default: New; session: NewSession, the
// advisory-lock store on pinned connections, with table as its
// SessionOptions.Table), migrate (true: run Migrate before returning) and sweep (a Go duration,
// Options.SweepInterval; lease mode only, refused with mode=session). Every other parameter goes to pgx (sslmode,
// pool_max_conns...). It creates a pgx pool, which the returned Close closes
// after the store. A malformed URL or parameter returns an error matching
// driver.ErrInvalid; a failed migration returns its error.
func Open(ctx context.Context, u *url.URL) (*driver.Opened, error) {
	connURL, opts, migrate, err := parseURL(u)
	session := u.Query().Get(paramMode) == "session"
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(connURL)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres URL: %v", driver.ErrInvalid, redact(err, u))
	}
	pool, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: pool: %w", redact(err, u))
	}
	if migrate {
		if err := Migrate(ctx, pool, opts); err != nil {
			pool.Close()
			return nil, err
		}
	}
	host := fmt.Sprintf("postgres %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if session {
		return openSession(pool, opts, host)
	}
	st, err := New(pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &driver.Opened{
		Store: st,
		Close: func() error {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := st.Close(c)
			pool.Close()
			return err
		},
		Describe: host + " lease table " + st.names.locks,
	}, nil
}

// openSession is Open's mode=session: a SessionStore on pool, which the
// returned Close closes after the store.
func openSession(pool *pgxpool.Pool, opts Options, host string) (*driver.Opened, error) {
	st, err := NewSession(pool, SessionOptions{Table: opts.Table})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &driver.Opened{
		Store: st,
		Close: func() error {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := st.Close(c)
			pool.Close()
			return err
		},
		Describe: host + " session lock (advisory), fences from " + st.table + "_fence",
	}, nil
}

// parseURL takes Open's own parameters out of u and returns the rest as a
// pgx connection URL.
func parseURL(u *url.URL) (connURL string, opts Options, migrate bool, err error) {
	bad := func(format string, args ...any) (string, Options, bool, error) {
		return "", Options{}, false, fmt.Errorf("%w: postgres URL: "+format, append([]any{driver.ErrInvalid}, args...)...)
	}
	if u.Host == "" && u.Query().Get("host") == "" {
		return bad("no host (postgres://user@host:port/database)")
	}
	q := u.Query()
	one := func(name string) (string, bool) {
		v, ok := q[name]
		if ok && len(v) != 1 {
			return "", false
		}
		q.Del(name)
		if !ok {
			return "", true
		}
		return v[0], true
	}
	table, ok1 := one(paramTable)
	mode, ok2 := one(paramMode)
	mig, ok3 := one(paramMigrate)
	sweep, ok4 := one(paramSweep)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return bad("give each of table, mode, migrate, sweep at most once")
	}
	if _, err := namesFor(table); err != nil {
		return bad("table %q: a lower-case SQL identifier of at most 40 bytes", table)
	}
	opts.Table = table
	switch mode {
	case "", "lease", "session":
	default:
		return bad("mode %q: want lease or session", mode)
	}
	switch strings.ToLower(mig) {
	case "", "false", "0":
	case "true", "1":
		migrate = true
	default:
		return bad("migrate %q: want true or false", mig)
	}
	if sweep != "" && mode == "session" {
		return bad("sweep applies to the lease table (mode=lease), not to mode=session")
	}
	if sweep != "" {
		d, err := time.ParseDuration(sweep)
		if err != nil {
			return bad("sweep: %v", err)
		}
		opts.SweepInterval = d
	}
	c := *u
	c.RawQuery = q.Encode()
	return c.String(), opts, migrate, nil
}

// redact removes the URL's password from err's text: pgx quotes the
// connection string in some errors.
func redact(err error, u *url.URL) error {
	if u.User == nil {
		return err
	}
	if p, ok := u.User.Password(); ok && p != "" && strings.Contains(err.Error(), p) {
		return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), p, "xxxxx"))
	}
	return err
}
