package redlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// Scheme is the URL scheme this package registers with driver.Register.
const Scheme = "redlock"

func init() { driver.Register(Scheme, open) }

// ParseURL parses a Redlock store URL into one go-redis option set per node
// (ClientOptions already applied), the key prefix and the store options. The
// forms are
//
//	redlock://[user:pass@]host:port,host:port,host:port[?query]
//	redlock://?node=redis://[user:pass@]host:port&node=rediss://…[&query]
//
// In the first form every node shares the credentials and the go-redis
// query parameters (dial_timeout=, …); in the second each node URL is a
// redis:// or rediss:// URL of its own, or a bare host:port (per-node credentials, TLS, database
// and go-redis parameters), and only the store's parameters may follow.
// The store's parameters: prefix= (the key prefix), node-timeout= (a Go
// duration, Options.NodeTimeout), drift-factor= (Options.DriftFactor) and
// fencing=false (Options.DisableFencing). Errors match driver.ErrInvalid and
// never contain a password.
func ParseURL(rawURL string) (nodes []*redis.Options, prefix string, opts *Options, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w: redlock URL: %v", driver.ErrInvalid, unwrapURLError(err))
	}
	return parse(u)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// urlParams are the store's URL parameters (driver.DecodeQuery).
type urlParams struct {
	Prefix      string        `param:"prefix,nonempty"`
	NodeTimeout time.Duration `param:"node-timeout,positive"`
	DriftFactor float64       `param:"drift-factor,positive"`
	Fencing     bool          `param:"fencing"`
	Node        []string      `param:"node"`
}

func parse(u *url.URL) ([]*redis.Options, string, *Options, error) {
	if !strings.EqualFold(u.Scheme, Scheme) {
		return nil, "", nil, fmt.Errorf("%w: redlock URL: scheme %q is not %s", driver.ErrInvalid, u.Scheme, Scheme)
	}
	p := urlParams{Fencing: true}
	rest, err := driver.DecodeQuery(u, &p, redisstore.NodeParams()...)
	if err != nil {
		return nil, "", nil, err
	}
	if p.DriftFactor >= 0.5 {
		return nil, "", nil, fmt.Errorf("%w: redlock URL: drift-factor=%v is not a number in (0, 0.5)", driver.ErrInvalid, p.DriftFactor)
	}
	opts := &Options{NodeTimeout: p.NodeTimeout, DriftFactor: p.DriftFactor, DisableFencing: !p.Fencing}
	nodeURLs, err := nodeList(u, p.Node, rest)
	if err != nil {
		return nil, "", nil, err
	}
	if len(nodeURLs) > MaxNodes {
		return nil, "", nil, fmt.Errorf("%w: redlock URL: %d nodes, at most %d", driver.ErrInvalid, len(nodeURLs), MaxNodes)
	}
	nodes := make([]*redis.Options, len(nodeURLs))
	seen := map[string]int{}
	for i, nu := range nodeURLs {
		o, nodeOpts, err := redisstore.ParseURL(nu)
		if err == nil && (nodeOpts.Prefix != "" || nodeOpts.Retention != 0) {
			err = fmt.Errorf("%w: prefix= and retention= belong to the redlock URL, not to a node", driver.ErrInvalid)
		} else if err == nil && nodeOpts.Fair {
			err = fmt.Errorf("%w: fair=true is not offered on Redlock (one server, Sentinel or Cluster only)", driver.ErrInvalid)
		}
		if err != nil {
			return nil, "", nil, fmt.Errorf("redlock URL: node %d: %w", i, err)
		}
		// One server named twice would vote twice: two owners could each
		// win a "majority". (Two names of one server, localhost and
		// 127.0.0.1, are for the doctor's independence check.)
		addr := strings.ToLower(o.Addr)
		if j, dup := seen[addr]; dup {
			return nil, "", nil, fmt.Errorf("%w: redlock URL: nodes %d and %d are the same server %s: each node must be an independent primary", driver.ErrInvalid, j, i, o.Addr)
		}
		seen[addr] = i
		ClientOptions(o)
		nodes[i] = o
	}
	return nodes, p.Prefix, opts, nil
}

// nodeList returns one redis:// URL per node: from the host list (with the
// shared credentials and go-redis parameters, rest) or from the node=
// parameters.
func nodeList(u *url.URL, nodeParams []string, rest url.Values) ([]string, error) {
	switch {
	case len(nodeParams) > 0 && u.Host != "":
		return nil, fmt.Errorf("%w: redlock URL: give the nodes either as hosts or as node= parameters, not both", driver.ErrInvalid)
	case len(nodeParams) > 0 && len(rest) > 0:
		return nil, fmt.Errorf("%w: redlock URL: with node= URLs, put client parameters (%s) on each node URL", driver.ErrInvalid, strings.Join(slices.Sorted(maps.Keys(rest)), ", "))
	case len(nodeParams) > 0:
		for i, n := range nodeParams {
			if !strings.Contains(n, "://") { // a bare host:port, as redis-cli users type it
				nodeParams[i] = "redis://" + n
			}
		}
		return nodeParams, nil
	case u.Host == "":
		return nil, fmt.Errorf("%w: redlock URL names no node: redlock://host:port,host:port,host:port or redlock://?node=redis://host:port&node=…", driver.ErrInvalid)
	case strings.Trim(u.Path, "/") != "":
		return nil, fmt.Errorf("%w: redlock URL: unexpected path %q (a database number goes on node= URLs)", driver.ErrInvalid, u.Path)
	}
	var out []string
	for _, h := range strings.Split(u.Host, ",") {
		if strings.TrimSpace(h) == "" {
			return nil, fmt.Errorf("%w: redlock URL: empty host in the list %q", driver.ErrInvalid, u.Host)
		}
		n := url.URL{Scheme: "redis", User: u.User, Host: strings.TrimSpace(h), RawQuery: rest.Encode()}
		out = append(out, n.String())
	}
	return out, nil
}

// open is the opener of redlock://: one client per node, which Close
// closes. It makes no network call.
func open(_ context.Context, u *url.URL) (*driver.Opened, error) {
	nodes, prefix, opts, err := parse(u)
	if err != nil {
		return nil, err
	}
	clients := make([]redis.UniversalClient, len(nodes))
	addrs := make([]string, len(nodes))
	for i, o := range nodes {
		clients[i], addrs[i] = redis.NewClient(o), o.Addr
	}
	closeClients := func() error {
		var errs []error
		for _, c := range clients {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
	s, err := NewRedis(clients, prefix, opts)
	if err != nil {
		_ = closeClients()
		return nil, err
	}
	desc := fmt.Sprintf("redlock over %d nodes %s", len(addrs), strings.Join(addrs, ","))
	if prefix != "" && prefix != redisstore.DefaultPrefix {
		desc += ", prefix " + prefix
	}
	if len(addrs) < 3 {
		desc += " (fewer than 3 nodes tolerate no failure)"
	}
	return &driver.Opened{Store: s, Describe: desc, Close: func() error {
		return errors.Join(s.Close(), closeClients())
	}}, nil
}
