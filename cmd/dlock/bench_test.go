package main

import (
	"strings"
	"testing"

	"example.com/dlock/internal/redisserver"
)

func TestBenchRunsAndChecksTheCounter(t *testing.T) {
	srv := redisserver.Start(t)
	code, out, stderr := runCLI(t, "bench", "--redis", srv.URL(), "--duration", "300ms", "--goroutines", "8")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"uncontended", "one-key", "ops/s", "fairness"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Log(out)
}

func TestBenchRejectsBadFlagsBeforeIO(t *testing.T) {
	code, _, stderr := runCLI(t, "bench", "--redis", "redis://127.0.0.1:1", "--goroutines", "0")
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d (stderr %q)", code, ExitUsage, stderr)
	}
}
