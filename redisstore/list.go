package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var _ driver.Lister = (*Store)(nil)

// listBatch is the SCAN COUNT hint, and so about the number of locks
// inspected per pipeline.
const listBatch = 200

// List implements driver.Lister. It finds the store's lock keys whose name
// starts with prefix by SCAN (never KEYS, so a large database is not
// blocked; on a Cluster every primary is scanned in turn), then reads each
// with the inspect script, a batch of keys per pipeline. It calls fn at most
// once per key, from the calling goroutine, and stops when fn returns false.
//
// A held lock is reported as Inspect reports it. A lock released within the
// store's retention (a tombstone, which keeps the key's last fence) is
// reported with Held false and that fence: it still has state. Keys under
// the prefix that are not locks (release records, another program's keys,
// values of an older layout) are skipped, as are locks that expire between
// the scan and the read. A lock taken or released during the scan may be
// missing or reported in its old state. Errors are the servers' (a scan
// that fails on one Cluster primary ends the listing), with refusals
// classified as for the other calls.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	servers, err := s.primaries(ctx)
	if err != nil {
		return err
	}
	l := lister{s: s, match: escapeGlob(s.prefix+"{"+prefix) + "*", seen: map[string]struct{}{}, fn: fn}
	for _, c := range servers {
		if more, err := l.scan(ctx, c); err != nil || !more {
			return err
		}
	}
	return nil
}

// primaries returns the servers that hold the store's keys: every primary
// of a Cluster, every shard of a Ring, else the client itself.
func (s *Store) primaries(ctx context.Context) ([]redis.Cmdable, error) {
	var (
		mu  sync.Mutex
		out []redis.Cmdable
	)
	add := func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		out = append(out, c)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, add)
	case *redis.Ring:
		err = c.ForEachShard(ctx, add)
	default:
		out = append(out, s.client)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: list: cannot reach every server: %w", err)
	}
	return out, nil
}

// lister is the state of one List call.
type lister struct {
	s     *Store
	match string
	seen  map[string]struct{} // SCAN may return a key more than once
	fn    func(string, driver.Info) bool
}

// scan lists the locks on one server; more is false once fn asked to stop.
func (l *lister) scan(ctx context.Context, c redis.Cmdable) (more bool, err error) {
	var cursor uint64
	for {
		var raw []string
		raw, cursor, err = c.ScanType(ctx, cursor, l.match, listBatch, "string").Result()
		if err != nil {
			return false, classify(err, l.match)
		}
		var names []string
		for _, k := range raw {
			name, ok := l.name(k)
			if _, dup := l.seen[name]; ok && !dup {
				l.seen[name] = struct{}{}
				names = append(names, name)
			}
		}
		if more, err = l.report(ctx, names); err != nil || !more || cursor == 0 {
			return more, err
		}
	}
}

// name returns the lock name of a Redis key PREFIX{name}, or false for a
// key of another shape (a release record PREFIX{name}:released:…).
func (l *lister) name(redisKey string) (string, bool) {
	p := l.s.prefix + "{"
	if len(redisKey) <= len(p) || !strings.HasPrefix(redisKey, p) || !strings.HasSuffix(redisKey, "}") {
		return "", false
	}
	name := redisKey[len(p) : len(redisKey)-1]
	return name, checkKey(name) == nil
}

// report inspects names in one pipeline (loading the script once if the
// server had lost it) and passes each lock to fn.
func (l *lister) report(ctx context.Context, names []string) (bool, error) {
	if len(names) == 0 {
		return true, nil
	}
	cmds := l.inspect(ctx, names)
	if slices.ContainsFunc(cmds, func(c *redis.Cmd) bool { return isNoScript(c.Err()) }) {
		if err := inspectScript.Load(ctx, l.s.client).Err(); err != nil {
			return false, classify(err, names[0])
		}
		cmds = l.inspect(ctx, names)
	}
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		var re redis.Error
		switch {
		case err != nil && errors.As(err, &re) && strings.Contains(err.Error(), "NOTALOCK"):
			continue // not a lock: skipped
		case err != nil:
			return false, classify(err, names[i])
		}
		info, ok := infoOf(v)
		if ok && !l.fn(names[i], info) {
			return false, nil
		}
	}
	return true, nil
}

// inspect runs the inspect script on names in one pipeline; each command
// carries its own error (the pipeline's is the first of them).
func (l *lister) inspect(ctx context.Context, names []string) []*redis.Cmd {
	pipe := l.s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(names))
	for i, n := range names {
		lock := l.s.lock(n)
		cmds[i] = inspectScript.EvalSha(ctx, pipe, []string{lock, metaKey(lock)})
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}

// infoOf decodes an inspect.lua reply; ok is false when the key has no
// state (gone, or a reply of another shape).
func infoOf(v []any) (info driver.Info, ok bool) {
	if len(v) != 5 {
		return driver.Info{}, false
	}
	owner, _ := v[0].(string)
	holds, _ := v[1].(int64)
	ttl, _ := v[2].(int64)
	f, _ := v[3].(int64)
	meta, _ := v[4].(string)
	if ttl == -2 && owner == "" && f == 0 {
		return driver.Info{}, false
	}
	return driver.Info{Held: owner != "", Token: owner, Holds: int(holds), Remaining: max(0, pttl(ttl)), Fence: uint64(f), Meta: meta}, true
}

// escapeGlob quotes the glob metacharacters of a literal SCAN pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
