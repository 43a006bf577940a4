package etcdserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Addr returns the member's client address, host:port.
func (m *Member) Addr() string { return strings.TrimPrefix(m.ClientURL, "http://") }

func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
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
	m.log = &bytes.Buffer{}
	w := &lockedWriter{mu: &m.mu, buf: m.log}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	m.cmd = cmd
	return nil
}

// Kill kills the member (SIGKILL) and waits for it to exit. Harmless if it is
// not running.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd := m.cmd
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

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
func (m *Member) Stop(timeout time.Duration) {
	m.mu.Lock()
	cmd := m.cmd
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Running reports whether the member's process was started and not stopped
// or killed since.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// Pause stops the member with SIGSTOP; Resume continues it.
func (m *Member) Pause() error { return m.signal(syscall.SIGSTOP) }

// Resume continues a paused member (SIGCONT).
func (m *Member) Resume() error { return m.signal(syscall.SIGCONT) }

func (m *Member) signal(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return fmt.Errorf("etcdserver: %s is not running", m.Name)
	}
	return m.cmd.Process.Signal(sig)
}

// Log returns what the member has written so far.
func (m *Member) Log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.log == nil {
		return ""
	}
	return m.log.String()
}

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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b [256]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode == http.StatusOK && bytes.Contains(b[:n], []byte(`"health":"true"`))
}

func (m *Member) waitHealthy(deadline time.Time) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok := m.Healthy(ctx)
		cancel()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy by the deadline", m.Name)
		}
		time.Sleep(50 * time.Millisecond) // polling a process we started, with a deadline
	}
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 4<<20 { // keep the log bounded
		return len(p), nil
	}
	return w.buf.Write(p)
}
