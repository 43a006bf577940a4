package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/driver"
	"github.com/go-sql-driver/mysql"
)

func init() { driver.Register("mysql", Open) }

// Open opens a store from a URL
//
//	mysql://user:password@host[:port]/database?table=dlock&mode=lease
//
// with the query parameters table (Options.Table), mode (lease, the
// default, or session), migrate (1 or true: run Migrate first), max-conns
// (session mode only: SessionOptions.MaxConns; refused in lease mode), dial-timeout (default 5s), and
// for TLS tls (true, skip-verify, preferred; default false), cacert (the
// authority to check the server's certificate against instead of the
// system's roots), cert and key (a client certificate); cacert, cert or
// key alone mean tls=true.
// The port defaults to 3306. It opens a go-sql-driver pool (parseTime=true,
// time_zone is irrelevant: expiry uses UTC_TIMESTAMP) and pings it (not
// with ctx's driver.OpenHints.NoIO, which skips migrate too; OpenHints.Conns
// sizes the pool, see sizePool); the
// returned Close closes the session lock (releasing its locks) and then the
// pool. A malformed URL or parameter returns an error matching
// driver.ErrInvalid; a server that refuses the connection (a wrong user or
// password, a database that does not exist or that the user may not use)
// driver.ErrRefused; an unreachable server a wrapped driver error.
func Open(ctx context.Context, u *url.URL) (*driver.Opened, error) {
	cfg, p, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql URL: %v", driver.ErrInvalid, err)
	}
	db := sql.OpenDB(connector)
	db.SetConnMaxIdleTime(time.Minute)
	hints := driver.OpenHintsFrom(ctx)
	sizePool(db, hints.Conns, p.Mode)
	fail := func(err error) (*driver.Opened, error) { db.Close(); return nil, err }
	if hints.NoIO {
		p.Migrate = false
	} else if err := db.PingContext(ctx); err != nil {
		if refusedConn(err) {
			return fail(fmt.Errorf("%w: mysqlstore: connect to %s: %w", driver.ErrRefused, cfg.Addr, err))
		}
		return fail(fmt.Errorf("mysqlstore: connect to %s: %w", cfg.Addr, err))
	}
	if p.Migrate {
		if err := Migrate(ctx, db, Options{Table: p.Table}); err != nil {
			return fail(err)
		}
	}
	desc := fmt.Sprintf("mysql %s/%s table %s mode %s", cfg.Addr, cfg.DBName, orDefault(p.Table), p.Mode)
	if p.Mode == "session" {
		s, err := NewSession(db, SessionOptions{Table: p.Table, MaxConns: p.MaxConns})
		if err != nil {
			return fail(err)
		}
		return &driver.Opened{Store: s, Describe: desc, Close: func() error { s.Close(); return db.Close() }}, nil
	}
	s, err := New(db, Options{Table: p.Table})
	if err != nil {
		return fail(err)
	}
	return &driver.Opened{Store: s, Describe: desc, Close: func() error { _ = s.Close(); return db.Close() }}, nil
}

// sizePool applies driver.OpenHints.Conns to db: that many connections
// kept idle (database/sql keeps 2, so each call beyond them would dial)
// and, in lease mode, at most that many open. In session mode the pool stays
// unbounded: the session store bounds its pinned connections (max-conns).
func sizePool(db *sql.DB, conns int, mode string) {
	if conns <= 0 {
		return
	}
	db.SetMaxIdleConns(conns)
	if mode != "session" {
		db.SetMaxOpenConns(conns)
	}
}

// refusedConn reports whether err is the server refusing a connection in a
// way that retrying cannot fix: ER_DBACCESS_DENIED_ERROR (1044),
// ER_ACCESS_DENIED_ERROR (1045: a wrong user or password, or a user that
// must connect over TLS), ER_BAD_DB_ERROR (1049: no such database) and
// ER_ACCESS_DENIED_NO_PASSWORD_ERROR (1698).
func refusedConn(err error) bool {
	switch errNumber(err) {
	case 1044, 1045, 1049, 1698:
		return true
	}
	return false
}

// ConnConfig returns the go-sql-driver configuration that Open connects
// with for the mysql:// URL u (address, port 3306 by default, user,
// password, database, dial-timeout, TLS from tls=, cacert=, cert= and key=,
// parseTime and interpolateParams) and the Options of its table= prefix, so
// that a program can make a pool of its own (mysql.NewConnector) that
// reaches the server as the store does. It checks every parameter Open
// takes, makes no network call, and returns an error matching
// driver.ErrInvalid for a malformed URL or parameter.
func ConnConfig(u *url.URL) (*mysql.Config, Options, error) {
	cfg, p, err := parseURL(u)
	if err != nil {
		return nil, Options{}, err
	}
	return cfg, Options{Table: p.Table}, nil
}

func orDefault(table string) string {
	if table == "" {
		return DefaultTable
	}
	return table
}

// urlParams are the store's own URL parameters (driver.DecodeQuery).
type urlParams struct {
	Table       string          `param:"table"`
	Mode        string          `param:"mode,oneof=lease|session"`
	Migrate     bool            `param:"migrate"`
	MaxConns    int             `param:"max-conns,positive,when=mode:session"`
	DialTimeout time.Duration   `param:"dial-timeout,positive"`
	TLS         string          `param:"tls,oneof=true|false|skip-verify|preferred"`
	TLSFiles    driver.TLSFiles `param:""`
}

// parseURL turns a mysql:// URL into a driver configuration and the
// store's parameters.
func parseURL(u *url.URL) (*mysql.Config, urlParams, error) {
	bad := func(format string, args ...any) (*mysql.Config, urlParams, error) {
		return nil, urlParams{}, fmt.Errorf("%w: mysql URL: "+format, append([]any{driver.ErrInvalid}, args...)...)
	}
	if u.Host == "" {
		return bad("no host (mysql://user:password@host:port/database)")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "3306"
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil || host == "" {
		return bad("bad host:port %q", u.Host)
	}
	p := urlParams{Mode: "lease", DialTimeout: 5 * time.Second}
	if _, err := driver.DecodeQuery(u, &p); err != nil {
		return nil, urlParams{}, err
	}
	if _, err := tableNames(p.Table); err != nil {
		return nil, urlParams{}, err
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	cfg.ParseTime = true
	cfg.InterpolateParams = true // one round trip per statement, not prepare + execute
	cfg.Timeout = p.DialTimeout
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return bad("the path must name one database (mysql://host/database)")
	}
	if err := urlTLS(cfg, p); err != nil {
		return nil, urlParams{}, err
	}
	return cfg, p, nil
}

// urlTLS sets cfg's TLS from the URL's tls=, cacert=, cert= and key=:
// tls=true checks the server's certificate (against cacert= if given,
// else the system's roots), tls=skip-verify encrypts without checking it,
// tls=preferred uses TLS when the server offers it; cacert=, cert= or key=
// without tls= mean tls=true. Unknown tls= values, a file it cannot use,
// and files with skip-verify or preferred return driver.ErrInvalid.
func urlTLS(cfg *mysql.Config, p urlParams) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: mysql URL: "+format, append([]any{driver.ErrInvalid}, args...)...)
	}
	files := p.TLSFiles.Any()
	switch p.TLS {
	case "", "false":
		if !files {
			return nil
		}
		if p.TLS == "false" {
			return bad("cacert=, cert= and key= need TLS: drop tls=false")
		}
	case "skip-verify", "preferred":
		if files {
			return bad("tls=%s takes no cacert=, cert= or key= (use tls=true)", p.TLS)
		}
		cfg.TLSConfig = p.TLS
		return nil
	}
	tc, err := p.TLSFiles.Config()
	if err != nil {
		return fmt.Errorf("mysql URL: %w", err)
	}
	cfg.TLS = tc
	return nil
}
