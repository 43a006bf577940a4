package zkstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

func init() { driver.Register("zk", Open) }

// defaultDialTimeout bounds Open's wait for a session.
const defaultDialTimeout = 10 * time.Second

// Open opens a Store from a URL zk://[user:password@]host:port[,host:port...][/root]
// with the query parameters session-timeout (a Go duration, default 10s),
// dial-timeout (how long to wait for a session, default 10s), prefix (put
// in front of every lock name, as the CLI's --prefix does), rw-root
// (Options.RWRoot, default /dlock-rw), sem-root (Options.SemRoot, default
// /dlock-sem) and acl. User
// information authenticates the session with ZooKeeper's digest scheme
// (Options.Auth); acl=creator (which needs it) creates every node with the
// ACL "auth" (only that user can read or delete it: Options.ACL), acl=open
// (the default) with the open ACL. The path
// is Options.Root (default /dlock): zk://h:2181/locks puts lock N at
// /locks/N, where a Curator InterProcessMutex on /locks/N takes the same
// lock. It connects (Dial) and waits for a session; the returned Close
// closes the connection, which ends the session and frees its locks. A
// malformed URL or parameter returns an error matching driver.ErrInvalid.
func Open(ctx context.Context, u *url.URL) (*driver.Opened, error) {
	servers, opts, dial, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, dial)
	defer cancel()
	st, err := Dial(dctx, servers, opts)
	if err != nil {
		return nil, err
	}
	return &driver.Opened{
		Store:    st,
		Close:    st.Close,
		Describe: fmt.Sprintf("zookeeper %s root %s session %v", strings.Join(servers, ","), st.root, st.timeout),
	}, nil
}

// urlParams are Open's URL parameters (driver.DecodeQuery).
type urlParams struct {
	Prefix         string        `param:"prefix"`
	RWRoot         string        `param:"rw-root"`
	SemRoot        string        `param:"sem-root"`
	ACL            string        `param:"acl,oneof=open|creator"`
	SessionTimeout time.Duration `param:"session-timeout,positive"`
	DialTimeout    time.Duration `param:"dial-timeout,positive"`
}

// parseURL turns a zk:// URL into servers, Options and the dial timeout.
func parseURL(u *url.URL) ([]string, Options, time.Duration, error) {
	bad := func(format string, args ...any) ([]string, Options, time.Duration, error) {
		return nil, Options{}, 0, fmt.Errorf("%w: zk URL: "+format, append([]any{driver.ErrInvalid}, args...)...)
	}
	if u.Host == "" {
		return bad("no host (zk://host:port[,host:port...]/root)")
	}
	var opts Options
	if u.User != nil {
		pw, ok := u.User.Password()
		if u.User.Username() == "" || !ok {
			return bad("digest auth needs user:password@")
		}
		opts.Auth = []Auth{{Scheme: "digest", Secret: []byte(u.User.Username() + ":" + pw)}}
	}
	var servers []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" || strings.ContainsAny(h, "/?#@") {
			return bad("bad server %q", h)
		}
		if !strings.Contains(h, ":") {
			h += ":2181"
		}
		servers = append(servers, h)
	}
	if p := strings.TrimRight(u.Path, "/"); p != "" {
		if _, err := cleanRoot(p); err != nil {
			return bad("root: %v", err)
		}
		opts.Root = p
	}
	p := urlParams{ACL: "open", DialTimeout: defaultDialTimeout}
	if _, err := driver.DecodeQuery(u, &p); err != nil {
		return nil, Options{}, 0, err
	}
	if p.ACL == "creator" {
		if u.User == nil {
			return bad("acl=creator needs credentials (zk://user:password@...)")
		}
		opts.ACL = zk.AuthACL(zk.PermAll)
	}
	if p.RWRoot != "" {
		if _, err := cleanRoot(p.RWRoot); err != nil {
			return nil, Options{}, 0, &driver.ParamError{Scheme: "zk", Param: "rw-root", Reason: fmt.Sprintf("rw-root %q is not an absolute ZooKeeper path", p.RWRoot)}
		}
		opts.RWRoot = p.RWRoot
	}
	if p.SemRoot != "" {
		if _, err := cleanRoot(p.SemRoot); err != nil {
			return nil, Options{}, 0, &driver.ParamError{Scheme: "zk", Param: "sem-root", Reason: fmt.Sprintf("sem-root %q is not an absolute ZooKeeper path", p.SemRoot)}
		}
		opts.SemRoot = p.SemRoot
	}
	opts.Prefix, opts.SessionTimeout = p.Prefix, p.SessionTimeout
	dial := p.DialTimeout
	return servers, opts, dial, nil
}
