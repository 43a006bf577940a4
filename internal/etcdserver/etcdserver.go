// Package etcdserver starts real etcd servers (the etcd binary on PATH or at
// /usr/bin/etcd, Debian's etcd-server 3.4) for the tests of every module: a
// single node or a cluster of members on free loopback ports, each with a
// temporary data directory, and stops, kills, restarts and pauses them.
// Every member is killed and its directory removed when the test ends.
//
// It has no etcd client dependency: it execs the binary, and readiness is a
// TCP dial of the client port followed by GET /health over HTTP. The
// client-based helpers (leader finding) are in etcdstore/internal/etcdtest.
//
// When the binary is missing the test is skipped with a message, unless the
// environment variable CI is "true", where it fails: CI must install it.
package etcdserver

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
	"example.com/dlock/internal/testcert"
)

// startTimeout bounds how long a cluster may take to become healthy.
const startTimeout = 30 * time.Second

// Binary returns the path of the etcd binary, or skips (fails under CI=true)
// the test when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	return binary(t, "etcd")
}

// Etcdctl returns the path of the etcdctl binary, or skips (fails under
// CI=true) the test when there is none.
func Etcdctl(t testing.TB) string {
	t.Helper()
	return binary(t, "etcdctl")
}

func binary(t testing.TB, name string) string {
	t.Helper()
	if p := Find(name); p != "" {
		return p
	}
	proc.Missing(t, "etcdserver: "+name+" not found", "Debian's etcd-server and etcd-client")
	return ""
}

// Find returns the path of the binary name, or "" if there is none.
func Find(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/bin/" + name; proc.FileExists(p) {
		return p
	}
	return ""
}

// Required reports whether missing binaries fail tests (CI=true) rather
// than skip them.
func Required() bool { return proc.Required() }

// Cluster is a set of etcd members started together.
type Cluster struct {
	Members []*Member
}

// Member is one etcd process.
type Member struct {
	Name      string
	ClientURL string // http://127.0.0.1:port (https:// with TLS)
	PeerURL   string
	tls       *testcert.Set // serve clients over TLS with these, if set
	dir       string
	bin       string
	initial   string // --initial-cluster
	token     string

	run proc.Handle // the running process and its log
}

// Start starts a single-node etcd.
func Start(t testing.TB) *Cluster { t.Helper(); return StartCluster(t, 1) }

// StartTLS starts a single-node etcd that serves its clients over TLS only,
// with set's server certificate, and requires a client certificate signed
// by set's authority (--client-cert-auth). Its ClientURL is https://.
func StartTLS(t testing.TB, set *testcert.Set) *Cluster {
	t.Helper()
	bin := Binary(t)
	c, err := launch(bin, t.TempDir(), 1, set)
	return proc.Launched(t, "etcdserver", c, err, (*Cluster).Stop)
}

// StartCluster starts n members forming one cluster and waits until every
// member answers /health. It fails the test on any error, with the members'
// logs, and kills the members when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Binary(t)
	c, err := Launch(bin, t.TempDir(), n)
	return proc.Launched(t, "etcdserver", c, err, (*Cluster).Stop)
}

// Launch starts n members of one cluster with the binary bin, their data
// under dir, and waits until every member answers /health. On error the
// members' logs are in the error. The caller must call Stop (also after an
// error, when the cluster is not nil).
func Launch(bin, dir string, n int) (*Cluster, error) { return launch(bin, dir, n, nil) }

func launch(bin, dir string, n int, set *testcert.Set) (*Cluster, error) {
	c := &Cluster{}
	scheme := "http"
	if set != nil {
		scheme = "https"
	}
	ports, err := proc.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			dir:       filepath.Join(dir, fmt.Sprintf("m%d", i)),
			bin:       bin,
			token:     fmt.Sprintf("dlock-test-%d", ports[0]),
			tls:       set,
		}
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		m.initial = strings.Join(initial, ",")
		if err := m.start(); err != nil {
			return c, err
		}
	}
	if err := c.WaitHealthy(startTimeout); err != nil {
		var logs strings.Builder
		for _, m := range c.Members {
			fmt.Fprintf(&logs, "\n--- log of %s:\n%s", m.Name, proc.Tail(m.Log(), 4000))
		}
		return c, fmt.Errorf("%w%s", err, logs.String())
	}
	return c, nil
}

// Stop kills every member.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		m.Kill()
	}
}

// Endpoints returns the client URLs of every member, in order.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientURL
	}
	return eps
}

// WaitHealthy polls every member's /health until all report healthy or
// timeout passes.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, m := range c.Members {
		if err := m.waitHealthy(deadline); err != nil {
			return err
		}
	}
	return nil
}
