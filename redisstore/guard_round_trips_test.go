package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
)

// TestGuardRoundTrips: the cost of Guard.Do on Redis, counted as the
// commands the client sends (a go-redis hook: every round trip) and the
// scripts the server runs (INFO commandstats): an uncontended call of a fresh key is
// two (the begin script and the completion script), a replay one (the
// begin), a call that meets a running execution one. Control: the same
// counts on a server whose scripts are not loaded yet see the extra
// round trip of the NOSCRIPT fallback (EVALSHA, then EVAL), so the counters
// see a call more.
func TestGuardRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		warm bool
		all  int64 // commands of a fresh key's Do
	}{
		{"warm", true, 2},
		{"cold scripts (control)", false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRoundTrips(t, tc.warm, tc.all)
		})
	}
}

// checkRoundTrips counts the round trips of a fresh key's Do (want all), a
// replay and an in-flight answer (want 1 each) on a new server, its
// scripts loaded first if warm.
func checkRoundTrips(t *testing.T, warm bool, all int64) {
	_, direct := newRedis(t)
	var hook countHook
	rdb := redis.NewClient(&redis.Options{Addr: direct.Options().Addr, MaxRetries: -1, PoolSize: 2})
	rdb.AddHook(&hook)
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	if err := rdb.Ping(testCtx(t)).Err(); err != nil { // open a connection first
		t.Fatal(err)
	}
	if warm {
		warmIdempotencyScripts(t, s)
	}
	g, err := dlock.NewGuard(s, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	count := func(what string, want int64, call func()) {
		t.Helper()
		client, server := hook.n.Load(), serverCalls(t, direct)
		call()
		gotClient, gotServer := hook.n.Load()-client, serverCalls(t, direct)-server
		t.Logf("%s: %d commands sent, %d run", what, gotClient, gotServer)
		if gotClient != want || gotServer != want {
			t.Errorf("%s: %d commands sent, %d run by the server; want %d", what, gotClient, gotServer, want)
		}
	}
	run := func(ctx context.Context, e dlock.Execution) ([]byte, error) { return []byte("charged"), nil }
	count("Do of a fresh key", all, func() {
		if r, err := g.Do(ctx, "fresh", "fp", run); err != nil || r.Replayed {
			t.Fatalf("Do = %+v, %v", r, err)
		}
	})
	count("a replay", 1, func() {
		if r, err := g.Do(ctx, "fresh", "fp", run); err != nil || !r.Replayed {
			t.Fatalf("replay = %+v, %v", r, err)
		}
	})
	_, err = g.Do(ctx, "busy", "fp", func(ctx context.Context, e dlock.Execution) ([]byte, error) {
		count("Do meeting a running execution", 1, func() {
			if _, err := g.Do(ctx, "busy", "fp", run); !errors.Is(err, dlock.ErrInFlight) {
				t.Errorf("the call that met the execution = %v, want ErrInFlight", err)
			}
		})
		return []byte("ok"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// countHook counts the round trips of a go-redis client: every command, and
// every pipeline as one.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// serverCalls returns how many script calls (EVALSHA and EVAL) the server
// has run: its commandstats count the commands scripts run too, so other
// commands are left to the client's count.
func serverCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || (name != "evalsha" && name != "eval") {
			continue
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}
