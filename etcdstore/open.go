package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"example.com/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

func init() {
	driver.Register("etcd", Open)
	driver.Register("etcds", Open)
}

// Open opens a Store from a URL etcd://[user:password@]host:port[,host:port...][/prefix]
// or etcds:// (TLS; cacert=, cert=, key=), with session-ttl (default 10s),
// dial-timeout (default 5s) and prefix= (or the path; not both), as
// docs/etcd.md "Opening a store" details. It creates an etcd client, which
// the returned Close closes after revoking the session. A malformed URL or
// parameter returns an error matching driver.ErrInvalid; credentials the
// cluster rejects, driver.ErrRefused; an unreachable cluster or a refused
// TLS handshake, driver.ErrUnavailable.
func Open(ctx context.Context, u *url.URL) (*driver.Opened, error) {
	cfg, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	// The client must outlive ctx, so ctx bounds only the dialling: a
	// deadline sooner than dial-timeout shortens it.
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < cfg.DialTimeout {
		cfg.DialTimeout = max(time.Until(dl), time.Millisecond)
	}
	// Connect now, so that an unreachable cluster or a refused TLS
	// handshake is reported here with its reason, not later as a timeout.
	//lint:ignore SA1019 grpc.DialContext, which the etcd client uses, honours both.
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithBlock(), grpc.WithReturnConnectionError())
	cli, err := clientv3.New(cfg)
	if err != nil {
		kind := driver.ErrUnavailable
		if errors.Is(err, rpctypes.ErrAuthFailed) {
			kind = driver.ErrRefused // a wrong user or password: retrying cannot fix it
		}
		return nil, fmt.Errorf("%w: etcdstore: connect to %s: %w", kind, strings.Join(cfg.Endpoints, ","), err)
	}
	st, err := New(cli, opts)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &driver.Opened{
		Store: st,
		Close: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			err := st.Close(ctx)
			if cerr := cli.Close(); err == nil {
				err = cerr
			}
			return err
		},
		Describe: fmt.Sprintf("etcd %s prefix %q session %v", strings.Join(cfg.Endpoints, ","), opts.Prefix, st.ttl),
	}, nil
}

// urlParams are Open's URL parameters (driver.DecodeQuery).
type urlParams struct {
	Prefix      string          `param:"prefix"`
	SessionTTL  time.Duration   `param:"session-ttl"`
	DialTimeout time.Duration   `param:"dial-timeout,positive"`
	TLS         driver.TLSFiles `param:",scheme=etcds"`
}

// parseURL turns an etcd:// URL into a client configuration and Options.
func parseURL(u *url.URL) (clientv3.Config, Options, error) {
	bad := func(format string, args ...any) (clientv3.Config, Options, error) {
		return clientv3.Config{}, Options{}, fmt.Errorf("%w: etcd URL: "+format, append([]any{driver.ErrInvalid}, args...)...)
	}
	if u.Host == "" {
		return bad("no host (etcd://host:port[,host:port...]/prefix)")
	}
	// gRPC keepalives let the client notice a blackholed endpoint and move
	// its calls to another member instead of waiting for their timeouts.
	// 5 s is the server's default minimum ping interval
	// (--grpc-keepalive-min-time): pinging more often gets the connection
	// closed by the server.
	// The client's own log lines (retries, balancer warnings) would go to
	// stderr in the middle of a CLI's output; its errors reach the caller.
	cfg := clientv3.Config{DialTimeout: 5 * time.Second, DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop()}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" || strings.ContainsAny(h, "/?#") {
			return bad("bad endpoint %q", h)
		}
		cfg.Endpoints = append(cfg.Endpoints, h)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	var opts Options
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		opts.Prefix = strings.TrimSuffix(p, "/") + "/"
	}
	p := urlParams{DialTimeout: cfg.DialTimeout}
	if _, err := driver.DecodeQuery(u, &p); err != nil {
		return clientv3.Config{}, Options{}, err
	}
	if u.Scheme == "etcds" {
		tc, err := p.TLS.Config()
		if err != nil {
			return clientv3.Config{}, Options{}, fmt.Errorf("etcd URL: %w", err)
		}
		cfg.TLS = tc
	}
	// prefix= (what the CLI's --prefix adds, as for Redis) is the key
	// prefix used verbatim; the path is the same thing spelt as a directory.
	if u.Query().Has("prefix") {
		if opts.Prefix != "" {
			return bad("give the prefix once: in the path or as prefix=, not both")
		}
		opts.Prefix = p.Prefix
	}
	if opts.SessionTTL = p.SessionTTL; u.Query().Has("session-ttl") && (p.SessionTTL < MinSessionTTL || p.SessionTTL%time.Second != 0) {
		return bad("session-ttl %v must be whole seconds and at least %v", p.SessionTTL, MinSessionTTL)
	}
	cfg.DialTimeout = p.DialTimeout
	return cfg, opts, nil
}
