package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"example.com/dlock/internal/etcdserver"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/pgserver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/zkserver"
)

// server is one store's server, started for the run.
type server struct {
	url string // the store's URL for driver.Open
	// what counts the store's requests, as the server counts them (see
	// counted), and stop ends the server.
	count   func(context.Context) (int64, error)
	counted string
	self    int64 // requests a count makes itself
	// trips, if set, counts round trips apart from requests (Redis: a
	// pipeline is one read of many commands).
	trips func(context.Context) (int64, error)
	stop  func()
}

// start starts store's server: redis, etcd, zk, pg or mysql.
func start(store string) (*server, error) {
	switch store {
	case "redis":
		return startRedis()
	case "etcd":
		return startEtcd()
	case "zk":
		return startZK()
	case "pg":
		return startPG()
	case "mysql":
		return startMySQL()
	}
	return nil, fmt.Errorf("unknown store %q (redis, etcd, zk, pg, mysql)", store)
}

func startRedis() (*server, error) {
	srv, err := redisserver.StartProcess("")
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	stats := func(ctx context.Context, name string) (int64, error) {
		info, err := rdb.Info(ctx, "stats").Result()
		if err != nil {
			return 0, err
		}
		return field(info, name+":")
	}
	return &server{url: "redis://" + srv.Addr(), self: 1, counted: "commands (INFO total_commands_processed, a script's own calls included); round trips: reads (INFO total_reads_processed, one per pipeline read)",
		count: func(ctx context.Context) (int64, error) { return stats(ctx, "total_commands_processed") },
		trips: func(ctx context.Context) (int64, error) { return stats(ctx, "total_reads_processed") },
		stop:  func() { _ = rdb.Close(); srv.Close() }}, nil
}

func startEtcd() (*server, error) {
	dir, err := os.MkdirTemp("", "dlockbench-scale-etcd-")
	if err != nil {
		return nil, err
	}
	c, err := etcdserver.Launch(etcdserver.Find("etcd"), dir, 1)
	if err != nil {
		if c != nil {
			c.Stop()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	m := c.Members[0]
	return &server{url: "etcd://" + strings.TrimPrefix(m.ClientURL, "http://"), counted: "gRPC messages received (grpc_server_msg_received_total)",
		count: func(ctx context.Context) (int64, error) { return etcdMessages(ctx, m.ClientURL+"/metrics") },
		stop:  func() { c.Stop(); os.RemoveAll(dir) }}, nil
}

// etcdMessages sums grpc_server_msg_received_total over its methods.
func etcdMessages(ctx context.Context, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "grpc_server_msg_received_total{") {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return 0, err
			}
			sum += v
		}
	}
	return int64(sum), sc.Err()
}

func startZK() (*server, error) {
	java, err := zkserver.Find()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dlockbench-scale-zk-")
	if err != nil {
		return nil, err
	}
	e, err := zkserver.Launch(java, dir, 1)
	if err != nil {
		if e != nil {
			e.Close()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	addr := e.Addrs()[0]
	return &server{url: "zk://" + addr, counted: "packets received (mntr zk_packets_received)",
		count: func(context.Context) (int64, error) {
			out, err := zkserver.FourLetter(addr, "mntr", 5*time.Second)
			if err != nil {
				return 0, err
			}
			return field(out, "zk_packets_received\t")
		},
		stop: func() { e.Close(); os.RemoveAll(dir) }}, nil
}

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
	db, err := sql.Open("pgx", s.URL())
	if err != nil {
		s.Remove()
		return nil, err
	}
	// Backends report their counts at most once a second, idle ones within
	// 10 s: count waits for that (pgLag) before reading.
	return &server{url: s.URL() + "&migrate=true", self: 1, counted: "transactions (pg_stat_database, read after an 11 s settle)",
		count: func(ctx context.Context) (n int64, err error) {
			time.Sleep(pgLag)
			err = db.QueryRowContext(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
			return n, err
		},
		stop: func() { _ = db.Close(); s.Remove() }}, nil
}

// pgLag is how long PostgreSQL's statistics may lag the work.
const pgLag = 11 * time.Second

func startMySQL() (*server, error) {
	dir, err := os.MkdirTemp("", "dlockbench-scale-mariadb-")
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
	db, err := sql.Open("mysql", s.DSN())
	if err != nil {
		s.Kill()
		os.RemoveAll(dir)
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &server{url: s.URL() + "?migrate=true", self: 1, counted: "statements (SHOW GLOBAL STATUS Questions, less this count's own)",
		count: func(ctx context.Context) (n int64, err error) {
			var name string
			err = db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n)
			return n, err
		},
		stop: func() { _ = db.Close(); s.Kill(); os.RemoveAll(dir) }}, nil
}

// field parses the integer after prefix in a line of text.
func field(text, prefix string) (int64, error) {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), strings.TrimSpace(prefix)); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %q in the server's reply", prefix)
}
