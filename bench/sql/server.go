package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"example.com/dlock/bench/internal/cmp"

	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/pgserver"
)

// server is a database server the program runs against.
type server struct {
	name, version string
	url           string // postgres:// URL or go-sql-driver DSN
	stop          func()
}

// startServer starts db's server, or uses the one given on the command line.
func startServer(db string, o options) (*server, error) {
	var s *server
	var err error
	switch {
	case db == dbPG && o.pgURL != "":
		s = &server{name: "PostgreSQL", url: o.pgURL, stop: func() {}}
	case db == dbMySQL && o.mysqlDSN != "":
		s = &server{name: "MariaDB", url: o.mysqlDSN, stop: func() {}}
	case db == dbPG:
		s, err = startPG()
	case db == dbMySQL:
		s, err = startMySQL()
	default:
		return nil, fmt.Errorf("unknown database %q (pg, mysql)", db)
	}
	if err != nil {
		return nil, err
	}
	if err := s.describe(db); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// describe reads the server's version and connection limit.
func (s *server) describe(db string) error {
	sdb, err := openSQL(db, s.url, &counter{}, 1)
	if err != nil {
		return err
	}
	defer sdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v, maxConns string
	if err := sdb.QueryRowContext(ctx, `SELECT version()`).Scan(&v); err != nil {
		return err
	}
	if err := sdb.QueryRowContext(ctx, `SELECT @@max_connections`).Scan(&maxConns); db == dbPG || err != nil {
		if err := sdb.QueryRowContext(ctx, `SHOW max_connections`).Scan(&maxConns); err != nil {
			return err
		}
	}
	s.version = fmt.Sprintf("server: %s (max_connections %s); clients: %s", v, maxConns, deps())
	return nil
}

// deps names the versions of the modules compared.
func deps() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown versions"
	}
	var out []string
	for _, d := range bi.Deps {
		switch d.Path {
		case "cirello.io/pglock", "github.com/jackc/pgx/v5", "github.com/go-sql-driver/mysql":
			out = append(out, d.Path+" "+d.Version)
		}
	}
	return strings.Join(out, ", ")
}

// machine names the machine and Go.
func machine() string {
	return fmt.Sprintf("machine: %s, %d CPUs, %s/%s; %s", cmp.CPUModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// startPG starts a PostgreSQL server (internal/pgserver: initdb in a
// temporary directory, as the postgres user when root, fsync off).
func startPG() (*server, error) {
	bins := map[string]string{}
	for _, name := range []string{"postgres", "initdb", "pg_isready"} {
		if bins[name] = pgserver.Find(name); bins[name] == "" {
			return nil, fmt.Errorf("no %s: install Debian's postgresql", name)
		}
	}
	s, err := pgserver.Launch(bins)
	if err != nil {
		if s != nil {
			s.Remove()
		}
		return nil, err
	}
	return &server{name: "PostgreSQL", url: s.URL(), stop: s.Remove}, nil
}

// startMySQL starts a MariaDB server (internal/mysqlserver: a data
// directory bootstrapped in a temporary directory).
func startMySQL() (*server, error) {
	dir, err := os.MkdirTemp("", "dlockbench-mariadb-")
	if err != nil {
		return nil, err
	}
	s, err := mysqlserver.Launch(dir)
	if err != nil {
		if s != nil {
			s.Kill()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	return &server{name: "MariaDB", url: s.DSN(), stop: func() { s.Kill(); os.RemoveAll(dir) }}, nil
}
