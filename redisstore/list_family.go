package redisstore

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var (
	_ driver.RWLister     = (*Store)(nil)
	_ driver.PermitLister = (*Store)(nil)
)

// ListRW implements driver.RWLister: SCAN (never KEYS; every primary of a
// Cluster in turn) for the hashes PREFIX{name}:rw whose name starts with
// prefix, then InspectRW of each, one call per key. Keys whose holdings and
// mark have all ended are skipped, as are hashes that are not read-write
// locks (the server refuses to read them as such). A key taken or released
// during the scan may be missing or reported in its old state.
func (s *Store) ListRW(ctx context.Context, prefix string, fn func(string, driver.RWInfo) bool) error {
	return s.listHashes(ctx, prefix, ":rw", func(name string) (bool, error) {
		info, err := s.InspectRW(ctx, name)
		switch {
		case errors.Is(err, driver.ErrRefused):
			return true, nil // not a read-write lock: skipped
		case err != nil:
			return false, err
		case len(info.Holders) == 0 && info.WriterWaiting <= 0:
			return true, nil
		}
		return fn(name, info), nil
	})
}

// ListPermits implements driver.PermitLister as ListRW does, over the
// hashes PREFIX{name}:sem; keys with no permit out are skipped.
func (s *Store) ListPermits(ctx context.Context, prefix string, fn func(string, driver.PermitInfo) bool) error {
	return s.listHashes(ctx, prefix, ":sem", func(name string) (bool, error) {
		info, err := s.InspectPermits(ctx, name)
		switch {
		case errors.Is(err, driver.ErrRefused):
			return true, nil
		case err != nil:
			return false, err
		case info.Used == 0:
			return true, nil
		}
		return fn(name, info), nil
	})
}

// listHashes scans every primary for the hashes PREFIX{name}SUFFIX whose
// name starts with prefix and passes each name once to each, until it
// returns false or an error.
func (s *Store) listHashes(ctx context.Context, prefix, suffix string, each func(name string) (bool, error)) error {
	servers, err := s.primaries(ctx)
	if err != nil {
		return err
	}
	match := escapeGlob(s.prefix+"{"+prefix) + "*" + escapeGlob("}"+suffix)
	seen := map[string]struct{}{} // SCAN may return a key more than once
	for _, c := range servers {
		if more, err := s.scanHashes(ctx, c, match, suffix, seen, each); err != nil || !more {
			return err
		}
	}
	return nil
}

func (s *Store) scanHashes(ctx context.Context, c redis.Cmdable, match, suffix string, seen map[string]struct{}, each func(string) (bool, error)) (bool, error) {
	head, tail := s.prefix+"{", "}"+suffix
	var cursor uint64
	for {
		raw, next, err := c.ScanType(ctx, cursor, match, listBatch, "hash").Result()
		if err != nil {
			return false, classify(err, match)
		}
		for _, k := range raw {
			if !strings.HasPrefix(k, head) || !strings.HasSuffix(k, tail) || len(k) <= len(head)+len(tail) {
				continue
			}
			name := k[len(head) : len(k)-len(tail)]
			if _, dup := seen[name]; dup || checkKey(name) != nil {
				continue
			}
			seen[name] = struct{}{}
			if more, err := each(name); err != nil || !more {
				return false, err
			}
		}
		if cursor = next; cursor == 0 {
			return true, nil
		}
	}
}
