package redisstore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/internal/stepcall"
)

// serverCommands returns the commands the server has run since the last
// CONFIG RESETSTAT, by name, those that scripts run included (INFO
// commandstats), without the INFO and CONFIG calls themselves.
func serverCommands(t *testing.T, rdb *redis.Client) map[string]int {
	t.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatalf("INFO commandstats line %q: %v", line, err)
		}
		out[name] = n
	}
	return out
}

// perCycle formats commands ÷ cycles, sorted by name.
func perCycle(cmds map[string]int, cycles int) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(&b, "%s %.2f; ", name, float64(cmds[name])/float64(cycles))
	}
	return b.String()
}

// An uncontended lock+unlock of a key used before (the acquire meets the
// previous holding's tombstone, the common case of a lock taken again
// within the retention) makes Redis run exactly: two scripts (EVALSHA),
// and inside them TIME, GET and SET for the acquire (the fence from the
// clock and the tombstone, one write) and GET, SET of the tombstone, SET
// of the release record and PUBLISH for the release; with a client that
// never resends (MaxRetries -1) no release record, which no resent call
// could ever read. Counted by the server, so independent of load. The
// control is the same cycle with a
// resource read with the grant and written with the release (WithRead and
// Lease.Commit): the count sees its GET and SET.
func TestLockUnlockCommands(t *testing.T) {
	srv, rdb := newRedis(t) // MaxRetries -1: a client that never resends
	resending := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = resending.Close() })
	s := newStore(t, resending)
	ctx := testCtx(t)
	const cycles = 50
	count := func(cycle func(tok string) error) map[string]int {
		t.Helper()
		for i := range 3 + cycles {
			if i == 3 { // warmed up: scripts loaded, the tombstone there
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := cycle(strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
		return serverCommands(t, rdb)
	}
	plain := count(func(tok string) error {
		if _, err := s.Acquire(ctx, "cmds", tok, time.Minute); err != nil {
			return err
		}
		return s.Release(ctx, "cmds", tok)
	})
	want := map[string]int{"evalsha": 2, "time": 1, "get": 2, "set": 3, "publish": 1}
	for name := range want {
		want[name] *= cycles
	}
	t.Logf("lock+unlock: %s", perCycle(plain, cycles))
	if !maps.Equal(plain, want) {
		t.Errorf("lock+unlock ran %s; want %s", perCycle(plain, cycles), perCycle(want, cycles))
	}

	once := newStore(t, rdb)
	noRecord := count(func(tok string) error {
		if _, err := once.Acquire(ctx, "cmds", tok, time.Minute); err != nil {
			return err
		}
		return once.Release(ctx, "cmds", tok)
	})
	want["set"] -= cycles
	t.Logf("lock+unlock, a client that never resends: %s", perCycle(noRecord, cycles))
	if !maps.Equal(noRecord, want) {
		t.Errorf("lock+unlock, a client that never resends, ran %s; want %s (no release record)", perCycle(noRecord, cycles), perCycle(want, cycles))
	}

	read := count(func(tok string) error {
		if _, _, err := stepcall.AcquireRead(ctx, s, "cmds", tok, time.Minute, "res"); err != nil {
			return err
		}
		return stepcall.ReleaseWrite(ctx, s, "cmds", tok, "res", tok)
	})
	t.Logf("control, with a resource read and written: %s", perCycle(read, cycles))
	if read["get"]-plain["get"] != cycles || read["set"]-plain["set"] != cycles {
		t.Errorf("control: the count did not see the resource's GET and SET: %s", perCycle(read, cycles))
	}
}
