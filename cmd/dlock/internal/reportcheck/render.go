// Package reportcheck reads the demo's HTML report as a user sees it: it
// loads the page in headless Chromium, takes the DOM Chromium built, and
// checks that a newcomer who opens only that page can read it (Check).
package reportcheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Browser returns the path of Chromium for tb. Without one it skips tb,
// or fails it when CI=true (scripts/test.sh installs chromium there).
func Browser(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("chromium is not installed (scripts/test.sh installs it)")
	}
	tb.Skip("chromium is not installed")
	return ""
}

// Render loads the file at path in headless Chromium and returns the DOM
// Chromium built from it (--dump-dom), or Chromium's error and stderr.
// profile is an empty directory for Chromium's profile; nothing else is
// written.
func Render(ctx context.Context, chromium, path, profile string) (string, error) {
	out, err := run(ctx, chromium, path, profile, "--window-size=1200,800", "--dump-dom")
	return string(out), err
}

// Screenshot loads the file at path in headless Chromium and writes a PNG
// of its first 1200×3000 pixels (the whole of a report of about ten
// strategies) to png.
func Screenshot(ctx context.Context, chromium, path, profile, png string) error {
	_, err := run(ctx, chromium, path, profile, "--window-size=1200,3000", "--screenshot="+png)
	return err
}

func run(ctx context.Context, chromium, path, profile string, extra ...string) ([]byte, error) {
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile}, extra...)
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, chromium, append(args, "file://"+abs)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("chromium %v: %w\n%s", extra, err, stderr.String())
	}
	return stdout.Bytes(), nil
}
