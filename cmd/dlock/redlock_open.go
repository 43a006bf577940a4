package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/redlock"
)

// openRedlock builds a Redlock store over independent primaries, one client
// per URL (redis://, rediss:// or a bare host:port, as for --redis). It makes no network call.
// Bad or empty URLs return an exitError with ExitUsage; on any error the
// clients opened so far are closed. The returned openedStore owns the
// clients (Close closes them and the nodes' subscriptions).
func openRedlock(urls []string, prefix string) (*openedStore, error) {
	var clients []redis.UniversalClient
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	var addrs []string
	for _, u := range urls {
		u = strings.TrimSpace(u)
		if u == "" {
			closeAll()
			return nil, exitWith(ExitUsage, errors.New("--redlock: empty URL"))
		}
		o, err := parseRedisURL(u)
		if err != nil {
			closeAll()
			return nil, exitWith(ExitUsage, fmt.Errorf("--redlock: %w", err))
		}
		redlock.ClientOptions(o)
		clients = append(clients, redis.NewClient(o))
		addrs = append(addrs, o.Addr)
	}
	s, err := redlock.NewRedis(clients, prefix, nil)
	if err != nil {
		closeAll()
		return nil, exitWith(ExitUsage, fmt.Errorf("--redlock: %w", err))
	}
	desc := fmt.Sprintf("redlock over %d nodes %s", len(addrs), strings.Join(addrs, ","))
	if len(addrs) < 3 {
		desc += " (fewer than 3 nodes tolerate no failure)"
	}
	return &openedStore{Store: s, Clients: clients, Desc: desc}, nil
}
