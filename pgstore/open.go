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

// urlParams are Open's own URL parameters (driver.DecodeQuery); every
// parameter of pgxParams goes to pgx.
type urlParams struct {
	Table   string        `param:"table"`
	Mode    string        `param:"mode,oneof=lease|session"`
	Migrate bool          `param:"migrate"`
	Sweep   time.Duration `param:"sweep,positive,when=mode:lease"`
}

// pgxParams are the URL parameters pgx reads itself (libpq's connection
// keywords, pgx's pool and statement-cache settings) and the server
// settings a connection URL commonly carries. Any other parameter pgx would
// send to the server as a setting, which refuses a misspelt one at the
// first connection ("unrecognized configuration parameter"): Open refuses
// it at once, as libpq does. Other server settings go in
// options=-c name=value, as with libpq.
var pgxParams = []string{
	"host", "port", "database", "user", "password", "passfile", "connect_timeout",
	"sslmode", "sslkey", "sslcert", "sslcertmode", "sslrootcert", "sslnegotiation", "sslpassword", "sslsni",
	"krbspn", "krbsrvname", "target_session_attrs", "service", "servicefile",
	"min_protocol_version", "max_protocol_version", "channel_binding", "require_auth",
	"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime",
	"pool_max_conn_lifetime_jitter", "pool_max_conn_idle_time", "pool_health_check_period", "pool_ping_timeout",
	"statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode",
	"application_name", "options", "search_path", "timezone", "client_encoding",
	"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
}

// Open opens a lease-table Store from a URL
// postgres://user:password@host:port/database?table=dlock&mode=lease, as
// pgx reads it (postgresql:// too). Its own parameters: table (the prefix,
// Options.Table), mode (lease, the default: New; session: NewSession, the
// advisory-lock store on pinned connections, with table as its
// SessionOptions.Table), migrate (true: run Migrate before returning) and sweep (a Go duration,
// Options.SweepInterval; lease mode only, refused with mode=session).
// pgx's parameters (sslmode, pool_max_conns, application_name, …) go to
// pgx; any other is refused, as libpq refuses it (a server setting goes in
// options=-c name=value). It creates a pgx pool, which the returned Close
// closes after the store; it makes no network call but migrate's. Of
// ctx's driver.OpenHints it takes NoIO (migrate is then skipped) and Conns
// (the pool's MaxConns when the URL sets no pool_max_conns). A malformed
// URL or parameter returns an error matching driver.ErrInvalid; a failed
// migration returns its error.
func Open(ctx context.Context, u *url.URL) (*driver.Opened, error) {
	cfg, p, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	hints := driver.OpenHintsFrom(ctx)
	if hints.Conns > 0 && !u.Query().Has("pool_max_conns") {
		cfg.MaxConns = int32(min(hints.Conns, 1<<20))
	}
	opts := Options{Table: p.Table, SweepInterval: p.Sweep}
	pool, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: pool: %w", redact(err, u))
	}
	if p.Migrate && !hints.NoIO {
		if err := Migrate(ctx, pool, opts); err != nil {
			pool.Close()
			return nil, err
		}
	}
	host := fmt.Sprintf("postgres %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	st, desc, err := openMode(pool, p.Mode, opts)
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
		Describe: host + desc,
	}, nil
}

// openMode is Open's store on pool for mode (lease: New; session:
// NewSession) and the end of its description.
func openMode(pool *pgxpool.Pool, mode string, opts Options) (interface {
	driver.Mutex
	Close(context.Context) error
}, string, error) {
	if mode == "session" {
		st, err := NewSession(pool, SessionOptions{Table: opts.Table})
		if err != nil {
			return nil, "", err
		}
		return st, " session lock (advisory), fences from " + st.table + "_fence", nil
	}
	st, err := New(pool, opts)
	if err != nil {
		return nil, "", err
	}
	return st, " lease table " + st.names.locks, nil
}

// PoolConfig returns the pgx pool configuration that Open connects with
// for the postgres:// URL u (its own parameters removed, pgx's kept) and
// the Options of its table= prefix, so that a program can make a pool of
// its own that reaches the server as the store does. It checks every
// parameter Open takes, makes no network call, and returns an error
// matching driver.ErrInvalid for a malformed URL or parameter.
func PoolConfig(u *url.URL) (*pgxpool.Config, Options, error) {
	cfg, p, err := parseURL(u)
	if err != nil {
		return nil, Options{}, err
	}
	return cfg, Options{Table: p.Table, SweepInterval: p.Sweep}, nil
}

// parseURL decodes Open's own parameters and gives the rest to pgx.
func parseURL(u *url.URL) (*pgxpool.Config, urlParams, error) {
	if u.Host == "" && u.Query().Get("host") == "" {
		return nil, urlParams{}, fmt.Errorf("%w: postgres URL: no host (postgres://user@host:port/database)", driver.ErrInvalid)
	}
	p := urlParams{Mode: "lease"}
	rest, err := driver.DecodeQuery(u, &p, pgxParams...)
	if err != nil {
		return nil, urlParams{}, err
	}
	if _, err := namesFor(p.Table); err != nil {
		return nil, urlParams{}, fmt.Errorf("%w: postgres URL: table=%q: a lower-case SQL identifier of at most 40 bytes", driver.ErrInvalid, p.Table)
	}
	c := *u
	c.RawQuery = rest.Encode()
	cfg, err := pgxpool.ParseConfig(c.String())
	if err != nil {
		return nil, urlParams{}, fmt.Errorf("%w: postgres URL: %v", driver.ErrInvalid, redact(err, u))
	}
	return cfg, p, nil
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
