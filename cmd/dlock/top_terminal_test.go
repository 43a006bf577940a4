package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/proc"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/redisstore"
)

// tmuxPane is a tmux server of the test's own (socket sock) with one
// session, "top", of one pane.
type tmuxPane struct {
	t    *testing.T
	sock string
}

// needTmux skips the test without tmux, unless in CI (CI=true,
// proc.Required; scripts/test.sh installs it), where it fails.
func needTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if proc.Required() {
			t.Fatal("tmux not found, in CI (CI=true): scripts/test.sh installs it (Debian package tmux)")
		}
		t.Skip("tmux not found: this test runs dlock top in a real terminal (apt-get install tmux; scripts/test.sh installs it)")
	}
}

// startTmux starts script with sh in a 120x30 pane of a new tmux server,
// killed at cleanup.
func startTmux(t *testing.T, script string) tmuxPane {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	p := tmuxPane{t: t, sock: filepath.Join(dir, "tmux.sock")}
	p.run("-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "120", "-y", "30", "sh "+path)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", p.sock, "kill-server").Run() })
	return p
}

// run runs a tmux command against p's server and returns its output.
func (p tmuxPane) run(args ...string) string {
	p.t.Helper()
	c := exec.Command("tmux", append([]string{"-S", p.sock}, args...)...)
	c.Env = nil // cleanEnv without TMUX and TMUX_PANE: a test run inside tmux starts a server of its own
	for _, e := range cleanEnv() {
		if !strings.HasPrefix(e, "TMUX=") && !strings.HasPrefix(e, "TMUX_PANE=") {
			c.Env = append(c.Env, e)
		}
	}
	out, err := c.CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen is what the pane shows now, one string per line.
func (p tmuxPane) screen() []string {
	return strings.Split(strings.TrimRight(p.run("capture-pane", "-p", "-t", "top"), "\n"), "\n")
}

// flag is the value of a tmux format about the pane, such as
// #{alternate_on}.
func (p tmuxPane) flag(format string) string {
	return strings.TrimSpace(p.run("display-message", "-p", "-t", "top", format))
}

// waitScreen waits until the screen satisfies cond, failing with what and
// the screen after 20 s.
func (p tmuxPane) waitScreen(what string, cond func(lines []string) bool) []string {
	p.t.Helper()
	var lines []string
	if !testkit.Eventually(20*time.Second, func() bool { lines = p.screen(); return cond(lines) }) {
		p.t.Fatalf("%s: not within 20s; the screen:\n%s", what, strings.Join(lines, "\n"))
	}
	return lines
}

// rowOf reports whether lines have a row of key.
func rowOf(lines []string, key string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, key+" ") {
			return true
		}
	}
	return false
}

// hasLine reports whether one of lines is exactly s (trailing spaces aside).
func hasLine(lines []string, s string) bool {
	for _, l := range lines {
		if strings.TrimRight(l, " ") == s {
			return true
		}
	}
	return false
}

var topHeading = regexp.MustCompile(`^dlock top tmux:\*  (\d\d:\d\d:\d\d) UTC  sort key: `)

// dlock top in a real terminal (tmux) on Redis, while the test takes and
// releases locks: it takes the alternate screen and hides the cursor; the
// rows of new locks appear and a released lock's row goes; each frame
// replaces the last in place (one heading, on the first line, its clock
// moving, nothing scrolled off); q ends it with exit 0 and the terminal as
// it was (the main screen with what it showed, the cursor, line editing
// and echo), and so does Ctrl-C in a second run (after the script reads a
// line, so that the first view's end is seen alone).
func TestTopInATerminal(t *testing.T) {
	needTmux(t)
	srv := redisserver.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rc.Close() })
	st, err := redisstore.New(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(st)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := t.Context()
	a, err := c.Lock(ctx, "tmux:a")
	if err != nil {
		t.Fatal(err)
	}
	top := fmt.Sprintf("%q top --interval 100ms --store %q 'tmux:*'", dlockBinary(t), srv.URL())
	stty := `stty -a | tr ' ;' '\n\n' | grep -x -e -icanon -e icanon -e -echo -e echo | tr '\n' ' '; echo`
	p := startTmux(t, "trap true INT\necho before-top\n"+top+"\necho exit=$?\n"+stty+"\nread next\n"+top+"\necho exit2=$?\n"+stty+"\nexec sleep 600\n")

	p.waitScreen("the view with tmux:a", func(l []string) bool { return topHeading.MatchString(l[0]) && rowOf(l, "tmux:a") })
	if f := p.flag("#{alternate_on} #{cursor_flag}"); f != "1 0" {
		t.Errorf("during the view: alternate screen and cursor shown %q, want 1 and 0", f)
	}
	b, err := c.Lock(ctx, "tmux:b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(context.Background())
	p.waitScreen("a row for tmux:b", func(l []string) bool { return rowOf(l, "tmux:a") && rowOf(l, "tmux:b") })
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p.waitScreen("tmux:a's row gone after its release", func(l []string) bool { return !rowOf(l, "tmux:a") && rowOf(l, "tmux:b") })
	checkInPlace(t, p)

	p.run("send-keys", "-t", "top", "q")
	lines := p.waitScreen("exit after q", func(l []string) bool { return hasLine(l, "exit=0") })
	checkRestored(t, p, lines, 1)
	p.run("send-keys", "-t", "top", "Enter") // the script's read: on to the second view
	p.waitScreen("the second view", func(l []string) bool { return topHeading.MatchString(l[0]) && rowOf(l, "tmux:b") })
	p.run("send-keys", "-t", "top", "C-c")
	lines = p.waitScreen("exit after Ctrl-C", func(l []string) bool { return hasLine(l, "exit2=0") })
	checkRestored(t, p, lines, 2)
}

// checkInPlace checks that frames replace each other: the heading's clock
// moves while the screen has one heading, on its first line, and nothing
// has scrolled into the pane's history.
func checkInPlace(t *testing.T, p tmuxPane) {
	t.Helper()
	first := topHeading.FindStringSubmatch(p.screen()[0])
	p.waitScreen("a later frame (the heading's clock moving)", func(l []string) bool {
		m := topHeading.FindStringSubmatch(l[0])
		return m != nil && first != nil && m[1] != first[1]
	})
	for range 5 {
		lines := p.screen()
		if n := strings.Count(strings.Join(lines, "\n"), "dlock top "); n != 1 || !topHeading.MatchString(lines[0]) {
			t.Fatalf("%d headings, the first line %q: frames not in place:\n%s", n, lines[0], strings.Join(lines, "\n"))
		}
	}
	if h := p.flag("#{history_size}"); h != "0" {
		t.Errorf("%s lines scrolled off the pane during the view", h)
	}
}

// checkRestored checks the terminal after the view ended: the main screen
// with what it showed before (before-top), the cursor shown, and line
// editing and echo on (as many "icanon echo" lines as views ended).
func checkRestored(t *testing.T, p tmuxPane, lines []string, views int) {
	t.Helper()
	lines = p.waitScreen("stty's report", func(l []string) bool {
		n := 0
		for _, s := range l {
			if strings.Contains(s, "icanon ") {
				n++
			}
		}
		return n == views
	})
	screen := strings.Join(lines, "\n")
	if !hasLine(lines, "before-top") || strings.Contains(screen, "dlock top") ||
		strings.Count(screen, "icanon echo") != views || strings.Contains(screen, "-icanon") || strings.Contains(screen, "-echo") {
		t.Errorf("after view %d the terminal is not as it was:\n%s", views, screen)
	}
	if f := p.flag("#{alternate_on} #{cursor_flag}"); f != "0 1" {
		t.Errorf("after view %d: alternate screen and cursor shown %q, want 0 and 1", views, f)
	}
}
