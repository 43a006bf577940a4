package etcdserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"example.com/dlock/internal/proc"
)

// Addr returns the member's client address, host:port.
func (m *Member) Addr() string {
	return strings.TrimPrefix(strings.TrimPrefix(m.ClientURL, "http://"), "https://")
}

func (m *Member) start() error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(m.bin,
		"--name", m.Name,
		"--data-dir", filepath.Join(m.dir, "data"),
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL,
		"--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", m.initial,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", m.token,
		"--logger", "zap",
	)
	if m.tls != nil {
		// Clients must present a certificate the test authority signed.
		cmd.Args = append(cmd.Args, "--cert-file", m.tls.ServerCert, "--key-file", m.tls.ServerKey,
			"--trusted-ca-file", m.tls.CA, "--client-cert-auth")
	}
	if err := m.run.Start(cmd, proc.Single); err != nil {
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	return nil
}

// Kill kills the member (SIGKILL) and waits for it to exit. Harmless if it is
// not running.
func (m *Member) Kill() { m.run.Kill() }

// Restart starts a killed member again on its data directory and ports, and
// waits until it answers /health.
func (m *Member) Restart() error {
	m.Kill()
	if err := m.start(); err != nil {
		return err
	}
	return m.waitHealthy(time.Now().Add(startTimeout))
}

// Stop stops the member gracefully (SIGTERM) and waits up to timeout for it
// to exit, then kills it (SIGKILL). Harmless if it is not running. Restart
// starts it again on the same data.
func (m *Member) Stop(timeout time.Duration) { m.run.Stop(syscall.SIGTERM, timeout) }

// Running reports whether the member's process was started and not stopped
// or killed since.
func (m *Member) Running() bool { return m.run.Held() }

// Pause stops the member with SIGSTOP; Resume continues it.
func (m *Member) Pause() error { return m.signal(syscall.SIGSTOP) }

// Resume continues a paused member (SIGCONT).
func (m *Member) Resume() error { return m.signal(syscall.SIGCONT) }

func (m *Member) signal(sig syscall.Signal) error {
	err := m.run.Signal(sig)
	if errors.Is(err, proc.ErrNotRunning) {
		return fmt.Errorf("etcdserver: %s is not running", m.Name)
	}
	return err
}

// Log returns what the member has written so far (its latest part when it
// grew large).
func (m *Member) Log() string { return m.run.Log() }

// Healthy reports whether the member accepts a TCP connection on its client
// port and its /health says so; false on any error or when ctx ends first.
func (m *Member) Healthy(ctx context.Context) bool {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.Addr())
	if err != nil {
		return false
	}
	conn.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+"/health", nil)
	if err != nil {
		return false
	}
	hc := http.DefaultClient
	if m.tls != nil {
		cfg, err := m.tls.ClientConfig()
		if err != nil {
			return false
		}
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b [256]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode == http.StatusOK && bytes.Contains(b[:n], []byte(`"health":"true"`))
}

func (m *Member) waitHealthy(deadline time.Time) error {
	return proc.Poll(deadline, 50*time.Millisecond, func() error {
		if proc.Within(time.Second, m.Healthy) {
			return nil
		}
		return fmt.Errorf("%s not healthy by the deadline", m.Name)
	})
}
