package zkserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"example.com/dlock/internal/proc"
)

// Server is one ZooKeeper server process.
type Server struct {
	// ID is the server's myid (1-based).
	ID int
	// ClientPort, QuorumPort and ElectionPort are its loopback ports.
	ClientPort, QuorumPort, ElectionPort int
	dir                                  string
	java                                 string

	run proc.Handle // the running process and its log
}

// Addr returns the server's client address, host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.ClientPort) }

// configure writes the server's zoo.cfg and myid under its directory.
func (s *Server) configure(quorum []string) error {
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	cfg := []string{
		"tickTime=" + strconv.Itoa(int(TickTime/time.Millisecond)),
		"initLimit=10",
		"syncLimit=5",
		"dataDir=" + data,
		"clientPort=" + strconv.Itoa(s.ClientPort),
		"clientPortAddress=127.0.0.1",
		"maxSessionTimeout=" + strconv.Itoa(int(MaxSessionTimeout/time.Millisecond)),
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,mntr,ruok",
		// Unknown keys become system properties zookeeper.<key>: a short
		// election connect timeout so a restarted member rejoins quickly.
		"cnxTimeout=1000",
		"autopurge.purgeInterval=0",
	}
	cfg = append(cfg, quorum...)
	if err := os.WriteFile(s.cfgPath(), []byte(strings.Join(cfg, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o600)
}

func (s *Server) cfgPath() string { return filepath.Join(s.dir, "zoo.cfg") }

// classpath is zkEnv.sh's (configuration directory, then the server jar,
// whose manifest names its dependencies), with our configuration directory
// and slf4j-simple when it is installed.
func (s *Server) classpath() string {
	cp := []string{s.dir, Jar}
	if proc.FileExists(slf4jSimple) {
		cp = append(cp, slf4jSimple)
	}
	return strings.Join(cp, ":")
}

func (s *Server) start() error {
	cmd := exec.Command(s.java,
		// Small, quick-starting JVM: the tests run on few cores.
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dzookeeper.jmx.log4j.disable=true",
		// Read by the container manager without the zookeeper. prefix, so
		// not settable in zoo.cfg.
		"-Dznode.container.checkIntervalMs="+strconv.Itoa(int(ContainerCheckInterval/time.Millisecond)),
		"-cp", s.classpath(),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath(),
	)
	cmd.Dir = s.dir
	if err := s.run.Start(cmd, proc.Group); err != nil {
		return fmt.Errorf("start server %d: %w", s.ID, err)
	}
	return nil
}

// exited reports whether the process started last has exited by itself.
func (s *Server) exited() bool { return s.run.Exited() }

// Kill kills the server's process group (SIGKILL) and waits for it to exit.
// Harmless if it is not running.
func (s *Server) Kill() { s.run.Kill() }

// Restart starts a killed or stopped server again on its data directory and
// ports (killing it first if it runs), and waits until it serves.
func (s *Server) Restart() error {
	s.Kill()
	if err := s.start(); err != nil {
		return err
	}
	if err := s.waitServing(time.Now().Add(startTimeout)); err != nil {
		return fmt.Errorf("%w\n--- log:\n%s", err, proc.Tail(s.Log(), 4000))
	}
	return nil
}

// Stop stops the server gracefully (SIGTERM) and waits up to timeout for it
// to exit, then kills its process group. Harmless if it is not running.
// Restart starts it again on the same data.
func (s *Server) Stop(timeout time.Duration) { s.run.Stop(syscall.SIGTERM, timeout) }

// Running reports whether the server's process was started and not stopped
// or killed since.
func (s *Server) Running() bool { return s.run.Held() }

// Pause stops the server with SIGSTOP; Resume continues it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	err := s.run.Signal(sig)
	if errors.Is(err, proc.ErrNotRunning) {
		return fmt.Errorf("zkserver: server %d is not running", s.ID)
	}
	return err
}

// Log returns the server's log (its latest part when it grew large).
func (s *Server) Log() string { return s.run.Log() }

// FourLetter sends a four-letter word (srvr, mntr, ruok) to the server and
// returns its answer, within timeout.
func (s *Server) FourLetter(word string, timeout time.Duration) (string, error) {
	return FourLetter(s.Addr(), word, timeout)
}

// FourLetter sends a four-letter word to the server at addr and returns its
// answer, within timeout.
func FourLetter(addr, word string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(conn, 64<<10))
	return string(b), err
}

// Mode returns the server's mode as srvr reports it (standalone, leader,
// follower), or "" when it does not answer within timeout or does not serve.
func (s *Server) Mode(timeout time.Duration) string {
	out, err := s.FourLetter("srvr", timeout)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(out) {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

func (s *Server) waitServing(deadline time.Time) error {
	return proc.Poll(deadline, 50*time.Millisecond, func() error {
		if s.Mode(time.Second) != "" {
			return nil
		}
		if !s.Running() || s.exited() {
			return proc.Final(fmt.Errorf("server %d is not running", s.ID))
		}
		return fmt.Errorf("server %d not serving by the deadline", s.ID)
	})
}
