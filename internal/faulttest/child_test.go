package faulttest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/faulttest"
)

var roles = faulttest.NewRoles("FAULTTEST_CHILD_ROLE")

// echo says "hello <FAULTTEST_WHO>", then answers each line with
// "got <line>" until "quit", or fails on "fail".
var _ = roles.Register("echo", func() error {
	fmt.Println("hello", os.Getenv("FAULTTEST_WHO"))
	for {
		line, err := faulttest.ReadLine()
		if err != nil {
			return err
		}
		switch line {
		case "quit":
			return nil
		case "fail":
			return errors.New("asked to fail")
		}
		fmt.Println("got", line)
	}
})

func init() { roles.Run() }

// TestChildProtocol: the child runs its role with the environment given,
// lines go both ways, Value wants exactly two words, a clean exit is nil.
func TestChildProtocol(t *testing.T) {
	c := roles.Start(t, t.Context(), "echo", "FAULTTEST_WHO=x")
	if got := c.Value("hello"); got != "x" {
		t.Fatalf("hello %q, want x", got)
	}
	c.Send("a b")
	if got := c.Read("got"); got != "a b" {
		t.Fatalf("got %q, want %q", got, "a b")
	}
	c.Send("quit")
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil { // again: the same answer
		t.Fatal(err)
	}
}

// TestChildFailure: a failing role exits 1 with its error on stderr,
// which Wait reports.
func TestChildFailure(t *testing.T) {
	c := roles.Start(t, t.Context(), "echo")
	c.Read("hello")
	c.Send("fail")
	err := c.Wait()
	if err == nil || !strings.Contains(err.Error(), "asked to fail") || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("Wait = %v, want exit status 1 with the role's error", err)
	}
}

// TestChildStopped: StopHolder reads the fence and stops the child, which,
// resumed, answers what was sent; a child left stopped when the test ends is killed by the
// cleanup (the test would hang in its cleanup otherwise).
func TestChildStopped(t *testing.T) {
	c := roles.Start(t, t.Context(), "echo")
	c.Read("hello")
	c.Send("42")
	fence, stoppedAt := c.StopHolder("got")
	if fence != 42 || time.Since(stoppedAt) > time.Minute {
		t.Fatalf("StopHolder: %d at %v", fence, stoppedAt)
	}
	c.Resume("ping")
	if got := c.Read("got"); got != "ping" {
		t.Fatalf("got %q after SIGCONT", got)
	}
	c.Signal(syscall.SIGSTOP)
}

// TestChildReadWantsItsWord: the first word must be the one wanted, not a
// prefix of it (a "fenced" line is not a "fence" line). Run in a child
// test binary of its own, whose failure is the expected outcome.
func TestChildReadWantsItsWord(t *testing.T) {
	if os.Getenv("FAULTTEST_INNER") == "1" {
		c := roles.Start(t, t.Context(), "echo", "FAULTTEST_WHO=x")
		c.Read("hell") // must fail: the word is "hello"
		return
	}
	failsAlone(t, "TestChildReadWantsItsWord", "FAULTTEST_INNER=1", `child said "hello x", want "hell"`)
}

// failsAlone runs test in a test binary of its own with env added, for a
// control whose failure is the expected outcome: t fails unless that run
// fails saying want.
func failsAlone(t *testing.T, test, env, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := roles.Command(ctx, "", env)
	cmd.Args = []string{os.Args[0], "-test.run=^" + test + "$"}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("%s with %s: %v, want a failure saying %q\n%s", test, env, err, want, out)
	}
}
