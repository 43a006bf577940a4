package main

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock/internal/redisserver"
)

// topLoop draws at once, then once per interval, and ends with nil when
// its context is done; a draw that fails ends it with that error.
func TestTopLoopDrawsEveryIntervalUntilDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		var at []time.Duration
		var firsts []bool
		err := topLoop(ctx, 250*time.Millisecond, func(_ context.Context, first bool) error {
			at, firsts = append(at, time.Since(start)), append(firsts, first)
			if len(at) == 3 {
				cancel()
			}
			return nil
		})
		want := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond}
		if err != nil || len(at) != 3 || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
			t.Fatalf("err %v, frames at %v, want %v", err, at, want)
		}
		if firsts[0] != true || firsts[1] || firsts[2] {
			t.Errorf("first: %v", firsts)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		n := 0
		err := topLoop(t.Context(), time.Second, func(context.Context, bool) error {
			if n++; n == 2 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) || n != 2 {
			t.Fatalf("err %v after %d draws, want boom after 2", err, n)
		}
	})
}

// On a terminal the first frame clears the screen, each frame starts at the
// top left, clears the rest of every line and what lies below; elsewhere
// there is no escape code, and frames after the first start with a blank
// line.
func TestTopFramesInPlaceOnATerminalOnly(t *testing.T) {
	f := topFrame{At: "2026-11-29T10:00:00Z", Locks: []lockStatus{{Key: "k", Held: true, Holds: 1, Fence: 7}}, Unsupported: []string{}}
	var b strings.Builder
	_ = writeFrame(&b, f, "*", sortKey, true, true)
	_ = writeFrame(&b, f, "*", sortKey, true, false)
	frames := strings.Split(b.String(), ansiHome)
	if !strings.HasPrefix(b.String(), ansiClear+ansiHome) || len(frames) != 3 || strings.Count(b.String(), ansiClear) != 1 ||
		!strings.HasSuffix(frames[2], ansiClearDown) || !strings.Contains(frames[2], "k ") {
		t.Fatalf("terminal frames: %q", b.String())
	}
	for line := range strings.Lines(strings.TrimSuffix(frames[2], ansiClearDown)) {
		if !strings.HasSuffix(line, ansiClearLine+"\n") {
			t.Errorf("terminal line %q does not clear the rest of the line", line)
		}
	}
	b.Reset()
	_ = writeFrame(&b, f, "*", sortKey, false, true)
	_ = writeFrame(&b, f, "*", sortKey, false, false)
	if strings.Contains(b.String(), "\x1b") || strings.Count(b.String(), "\n\ndlock top *") != 1 || !strings.HasPrefix(b.String(), "dlock top *") {
		t.Errorf("plain frames: %q", b.String())
	}
}

// dlock top on Redis, stdout a pipe: frames follow one another without
// escape codes, each showing the lock, until SIGINT or SIGTERM ends it with
// exit status 0. The test signals once it has read two frames.
func TestTopRefreshesUntilSignalled(t *testing.T) {
	srv := redisserver.Start(t)
	holdKey(t, srv.URL(), "live:1")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := dlockCmd(t, nil, "top", "--interval", "20ms", "--store", srv.URL(), "live:*")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Bounded: a dlock that stops drawing without exiting is killed.
		stop := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		sc := bufio.NewScanner(out)
		frames, rows := 0, 0
		for frames < 2 && sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "\x1b") {
				t.Errorf("escape code on a pipe: %q", line)
			}
			if strings.HasPrefix(line, "dlock top live:*") {
				frames++
			}
			if strings.HasPrefix(line, "live:1 ") && strings.Contains(line, " lock ") {
				rows++
			}
		}
		if frames < 2 || rows < 1 {
			_ = cmd.Process.Kill()
			t.Fatalf("%v: %d frames, %d rows of live:1 before the output ended; stderr %q", sig, frames, rows, stderr.String())
		}
		_ = cmd.Process.Signal(sig)
		for sc.Scan() { // drain until dlock closes its stdout
		}
		stop.Stop()
		if err := cmd.Wait(); err != nil {
			t.Errorf("%v: dlock top ended with %v; stderr %q", sig, err, stderr.String())
		}
	}
}

// Bad flags and a bad PATTERN are usage errors before any I/O (the store
// URL is a closed port); a store without a Lister is 64 with one line, an
// unreachable one 69, one that cannot list now 69.
func TestTopExitCodes(t *testing.T) {
	closed := "redis://127.0.0.1:1"
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--sort", "age", "--store", closed}, ExitUsage, `--sort "age": want key, ttl, fence or waiters`},
		{[]string{"--json", "--store", closed}, ExitUsage, "--json needs --once"},
		{[]string{"--interval", "1ms", "--store", closed}, ExitUsage, "want at least 10ms"},
		{[]string{"--store", closed, "[ab"}, ExitUsage, "bad PATTERN"},
		{[]string{"--store", closed, "a", "b"}, ExitUsage, "at most one PATTERN"},
		{[]string{"--once", "--store", "mem://bare"}, ExitUsage, "this store cannot list locks"},
		{[]string{"--once", "--store", closed}, ExitUnavailable, "cannot reach"},
		{[]string{"--once", "--store", "mem://unsupported"}, ExitUnavailable, "cannot list"},
		{[]string{"--once", "--sort", "waiters", "--store", "mem://full", "none:*"}, 0, ""},
	} {
		code, out, stderr := runCLI(t, append([]string{"top"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) || c.code != 0 && (out != "" || strings.Count(stderr, "\n") != 1) {
			t.Errorf("top %q: exit %d, stdout %q, stderr %q; want %d and %q", c.args, code, out, stderr, c.code, c.want)
		}
	}
	if _, out, _ := runCLI(t, "top", "--help"); !strings.Contains(out, "--once --json prints the frame as one") {
		t.Errorf("top --help does not describe --json:\n%s", out)
	}
}
