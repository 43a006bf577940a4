package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestServerInstructions counts the instructions redis-server spends per
// uncontended lock+unlock, for dlock, redislock and the floor, in one run,
// with valgrind's callgrind (user space only: load-independent, unlike a
// CPU clock). It is slow (valgrind runs redis about 50× slower), so it runs
// only with DLOCK_CALLGRIND=1:
//
//	cd bench && DLOCK_CALLGRIND=1 go test -run ServerInstructions -v .
//
// DLOCK_CALLGRIND_LIBS picks the libraries (default floor,redislock,dlock;
// dlock-noresend is dlock over a client with go-redis's retries off). Each
// library runs warm-up cycles on its own key, then the counters are
// zeroed (callgrind_control -z), n cycles run, and the counters are dumped:
// the figure is the dump's instructions ÷ n, so start-up and warm-up cancel.
func TestServerInstructions(t *testing.T) {
	if os.Getenv("DLOCK_CALLGRIND") == "" {
		t.Skip("set DLOCK_CALLGRIND=1 (needs valgrind and callgrind_control)")
	}
	const n = 2000
	libs := strings.Split(envOr("DLOCK_CALLGRIND_LIBS", "floor,redislock,dlock"), ",")
	srv := startCallgrind(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	for round := range 2 {
		for _, name := range libs {
			c := rdb
			if name == "dlock-noresend" { // a client that never resends: no release record
				c = redis.NewClient(&redis.Options{Addr: srv.addr, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxRetries: -1})
				t.Cleanup(func() { _ = c.Close() })
			}
			l, err := newLocker(strings.TrimSuffix(name, "-noresend"), c, defaultTuning)
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("cg:%s:%d", name, round)
			cycles(t, ctx, l, key, 200)
			srv.control(t, "-z")
			cycles(t, ctx, l, key, n)
			ins := srv.dump(t)
			l.close()
			t.Logf("round %d %-10s %8.0f instructions per lock+unlock", round, name, float64(ins)/n)
		}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func cycles(t *testing.T, ctx context.Context, l locker, key string, n int) {
	for range n {
		unlock, err := l.lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

type callgrindServer struct {
	addr, dir string
	cmd       *exec.Cmd
}

func startCallgrind(t *testing.T) *callgrindServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &callgrindServer{addr: "127.0.0.1:" + strconv.Itoa(port), dir: t.TempDir()}
	s.cmd = exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(s.dir, "cg.out.%p"),
		"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: s.addr})
	defer rdb.Close()
	for i := 0; ; i++ {
		if rdb.Ping(context.Background()).Err() == nil {
			return s
		}
		if i == 300 {
			t.Fatal("redis-server under valgrind did not answer in 30 s")
		}
		time.Sleep(100 * time.Millisecond) // polling a process start-up
	}
}

func (s *callgrindServer) control(t *testing.T, arg string) {
	out, err := exec.Command("callgrind_control", arg, strconv.Itoa(s.cmd.Process.Pid)).CombinedOutput()
	if err != nil {
		t.Fatalf("callgrind_control %s: %v: %s", arg, err, out)
	}
}

// dump writes the counters since the last zeroing and returns their
// instruction total.
func (s *callgrindServer) dump(t *testing.T) int64 {
	before, _ := filepath.Glob(filepath.Join(s.dir, "cg.out.*"))
	s.control(t, "-d")
	after, _ := filepath.Glob(filepath.Join(s.dir, "cg.out.*"))
	if len(after) != len(before)+1 {
		t.Fatalf("callgrind dump: %d files before, %d after", len(before), len(after))
	}
	f, err := os.Open(after[len(after)-1])
	for _, p := range after {
		if !contains(before, p) {
			f, err = os.Open(p)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if keep := os.Getenv("DLOCK_CALLGRIND_KEEP"); keep != "" {
		if b, err := os.ReadFile(f.Name()); err == nil {
			_ = os.WriteFile(filepath.Join(keep, filepath.Base(f.Name())), b, 0o644)
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("callgrind dump without a summary line")
	return 0
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
