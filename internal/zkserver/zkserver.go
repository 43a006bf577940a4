// Package zkserver starts real ZooKeeper servers (Debian's zookeeper 3.8,
// run with `java ... org.apache.zookeeper.server.quorum.QuorumPeerMain
// zoo.cfg`) for the tests of every module: a standalone server or an
// ensemble of n members on free loopback ports (client, quorum and election
// ports), each with a temporary data directory and configuration, and kills,
// stops, restarts and pauses them. Every member's process group is killed
// and its directory removed when the test ends.
//
// Nothing is read from or written to /etc/zookeeper or /var: the classpath is
// the one zkEnv.sh builds (a configuration directory, then
// /usr/share/java/zookeeper.jar, whose manifest names its dependencies) with
// the test's own configuration directory, and slf4j-simple (when installed)
// writing the log to the member's Log. The admin HTTP server is off and the
// four-letter words srvr, mntr and ruok are allowed.
//
// tickTime is TickTime (200 ms), so the servers grant any session timeout
// from 2×TickTime (400 ms) to MaxSessionTimeout as asked.
//
// A JVM is slow to start on few cores: on two shared cores a standalone
// server serves about 0.8 s after start and a 3-server ensemble about 2.3 s
// (TestLifecycle and TestEnsemble log it), so a package's tests should share
// one server where their state allows (TestMain, each test under its own
// root path).
//
// It has no ZooKeeper client dependency: readiness and Leader use the srvr
// four-letter word over TCP.
//
// When java or the ZooKeeper jar is missing the test is skipped with a
// message, unless the environment variable CI is "true", where it fails:
// CI must install Debian's zookeeper package (it brings a JRE).
package zkserver

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
)

const (
	// TickTime is the servers' tickTime: the unit of their session
	// bookkeeping. The smallest session timeout they grant is 2×TickTime.
	TickTime = 200 * time.Millisecond
	// MaxSessionTimeout is the largest session timeout they grant.
	MaxSessionTimeout = 60 * time.Second
	// ContainerCheckInterval is how often the servers delete empty
	// container nodes (ZooKeeper's default is a minute): a released lock's
	// path is gone within about two intervals.
	ContainerCheckInterval = time.Second
	// startTimeout bounds how long an ensemble may take to serve.
	startTimeout = 60 * time.Second
)

// Jar is where Debian's zookeeper package puts the server jar.
const Jar = "/usr/share/java/zookeeper.jar"

// slf4jSimple is the logging backend put on the classpath when installed.
const slf4jSimple = "/usr/share/java/slf4j-simple.jar"

// Java returns the path of the java binary, or skips (fails under CI=true)
// the test when java or the ZooKeeper jar is missing.
func Java(t testing.TB) string {
	t.Helper()
	java, err := Find()
	if err == nil {
		return java
	}
	proc.Missing(t, "zkserver: "+err.Error(), "Debian's zookeeper package")
	return ""
}

// Find returns the java binary to run the server with, or an error naming
// what is missing (java, or the ZooKeeper jar).
func Find() (string, error) {
	if !proc.FileExists(Jar) {
		return "", fmt.Errorf("%s not found", Jar)
	}
	if p, err := exec.LookPath("java"); err == nil {
		return p, nil
	}
	if p := "/usr/bin/java"; proc.FileExists(p) {
		return p, nil
	}
	return "", errors.New("java not found")
}

// Required reports whether a missing server fails tests (CI=true) rather
// than skips them.
func Required() bool { return proc.Required() }

// Ensemble is a set of ZooKeeper servers started together: one standalone
// server, or the members of one quorum.
type Ensemble struct {
	Servers []*Server
}

// Start starts a standalone server.
func Start(t testing.TB) *Ensemble { t.Helper(); return StartEnsemble(t, 1) }

// StartEnsemble starts n servers (n = 1: standalone; else one quorum) and
// waits until every one serves. It fails the test on any error, with the
// servers' logs, and kills the servers when the test ends.
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	java := Java(t)
	e, err := Launch(java, t.TempDir(), n)
	return proc.Launched(t, "zkserver", e, err, (*Ensemble).Close)
}

// Launch starts n servers (n = 1: standalone) with the java binary java,
// their data and configuration under dir, and waits until every one serves.
// On error the servers' logs are in the error. The caller must call Close
// (also after an error, when the ensemble is not nil).
func Launch(java, dir string, n int) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zkserver: %d servers", n)
	}
	ports, err := proc.FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	e := &Ensemble{}
	var quorum []string
	for i := range n {
		s := &Server{
			ID:           i + 1,
			ClientPort:   ports[3*i],
			QuorumPort:   ports[3*i+1],
			ElectionPort: ports[3*i+2],
			dir:          filepath.Join(dir, fmt.Sprintf("zk%d", i+1)),
			java:         java,
		}
		quorum = append(quorum, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", s.ID, s.QuorumPort, s.ElectionPort))
		e.Servers = append(e.Servers, s)
	}
	if n == 1 {
		quorum = nil
	}
	for _, s := range e.Servers {
		if err := s.configure(quorum); err != nil {
			return e, err
		}
		if err := s.start(); err != nil {
			return e, err
		}
	}
	if err := e.WaitServing(startTimeout); err != nil {
		return e, fmt.Errorf("%w%s", err, e.logs())
	}
	return e, nil
}

func (e *Ensemble) logs() string {
	var b strings.Builder
	for _, s := range e.Servers {
		fmt.Fprintf(&b, "\n--- log of server %d:\n%s", s.ID, proc.Tail(s.Log(), 4000))
	}
	return b.String()
}

// Close kills every server.
func (e *Ensemble) Close() {
	for _, s := range e.Servers {
		s.Kill()
	}
}

// Addrs returns the client addresses (host:port) of every server, in order:
// what zk.Connect takes.
func (e *Ensemble) Addrs() []string {
	a := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		a[i] = s.Addr()
	}
	return a
}

// Kill kills server i (0-based) with SIGKILL.
func (e *Ensemble) Kill(i int) { e.Servers[i].Kill() }

// Stop stops server i gracefully (see Server.Stop).
func (e *Ensemble) Stop(i int) { e.Servers[i].Stop(10 * time.Second) }

// Restart starts server i again on its data and ports, and waits until it
// serves.
func (e *Ensemble) Restart(i int) error { return e.Servers[i].Restart() }

// Pause stops server i with SIGSTOP.
func (e *Ensemble) Pause(i int) error { return e.Servers[i].Pause() }

// Resume continues server i (SIGCONT).
func (e *Ensemble) Resume(i int) error { return e.Servers[i].Resume() }

// Leader returns the index of the server that says it is the leader (or
// standalone), or -1 when none does within timeout. Servers that do not
// answer (killed, paused) are skipped.
func (e *Ensemble) Leader(timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		for i, s := range e.Servers {
			if !s.Running() {
				continue
			}
			if m := s.Mode(time.Second); m == "leader" || m == "standalone" {
				return i
			}
		}
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(50 * time.Millisecond) // polling processes we started, with a deadline
	}
}

// WaitServing polls every running server's srvr until all serve requests or
// timeout passes.
func (e *Ensemble) WaitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, s := range e.Servers {
		if !s.Running() {
			continue
		}
		if err := s.waitServing(deadline); err != nil {
			return err
		}
	}
	return nil
}
