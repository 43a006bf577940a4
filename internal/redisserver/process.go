package redisserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/internal/proc"
)

const (
	// startTimeout bounds the wait for a new process to answer PING.
	startTimeout = 5 * time.Second
	// bindAttempts is how many fresh ports a new server tries.
	bindAttempts = 5
	// restartTimeout bounds the retries of Restart on a busy port.
	restartTimeout = 5 * time.Second
	// pollInterval is the readiness polling period.
	pollInterval = 20 * time.Millisecond
)

// errAddrInUse marks a start attempt that failed because the port was
// taken, which is worth retrying.
var errAddrInUse = errors.New("address already in use")

// bootFresh starts the server on newly chosen ports, retrying on bind races.
func (s *Server) bootFresh() error {
	var err error
	for range bindAttempts {
		if s.port, err = reservePort(); err != nil {
			return err
		}
		if s.cfg.clusterBus {
			if s.busPort, err = reservePort(); err != nil {
				releasePorts(s.port)
				return err
			}
		}
		if err = s.bootOnce(true); !errors.Is(err, errAddrInUse) {
			return err
		}
		releasePorts(s.port, s.busPort)
		s.port, s.busPort = 0, 0
	}
	return fmt.Errorf("redisserver: no free port after %d attempts: %w", bindAttempts, err)
}

// bootSamePort starts the server again on its ports, retrying for a bounded
// time while they are still busy.
func (s *Server) bootSamePort() error {
	deadline := time.Now().Add(restartTimeout)
	for {
		err := s.bootOnce(false)
		if !errors.Is(err, errAddrInUse) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond) // bounded retry, see deadline
	}
}

// bootOnce launches one process and waits until it is ready. On failure the
// process is killed and the error carries the log written by this attempt.
func (s *Server) bootOnce(writeConf bool) error {
	args, err := s.args(writeConf)
	if err != nil {
		return err
	}
	off := s.offsets()
	p, err := s.launch(args)
	if err != nil {
		return err
	}
	if err := s.waitReady(p); err != nil {
		p.Kill()
		tail := s.logTail(off)
		if errors.Is(err, errAddrInUse) || strings.Contains(tail, "Address already in use") {
			return fmt.Errorf("redisserver: %s: %w", s.Addr(), errAddrInUse)
		}
		return fmt.Errorf("redisserver: start %s in %s: %w\nlog:\n%s", s.Addr(), s.dir, err, tail)
	}
	s.setProc(p)
	return nil
}

// launch starts redis-server with stdout and stderr appended to stderr.log
// (configuration errors are printed there before the log file is opened).
func (s *Server) launch(args []string) (*proc.Process, error) {
	path := filepath.Join(s.dir, stderrName)
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("redisserver: open %s: %w", path, err)
	}
	defer out.Close()
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group (so Kill reaches forked children and a
	// terminal's Ctrl-C does not), killed if the test binary dies (Linux).
	p, err := proc.Start(cmd, proc.Group)
	if err != nil {
		return nil, fmt.Errorf("redisserver: exec %s: %w", s.bin, err)
	}
	return p, nil
}

// waitReady polls PING until the process answers, exits, or startTimeout
// passes. It then checks via INFO that the answer came from this process
// and not from another server that holds the port (errAddrInUse).
func (s *Server) waitReady(p *proc.Process) error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for {
		select {
		case <-p.Done():
			return fmt.Errorf("redis-server exited early (%v)", p.Err())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		reply, err := do(ctx, s.Addr(), "PING")
		cancel()
		if err == nil && reply == "PONG" {
			// its own bound: the PING's may be nearly spent on a loaded machine
			ictx, icancel := context.WithTimeout(context.Background(), DefaultDoTimeout)
			defer icancel()
			return checkPID(ictx, s.Addr(), p.Pid())
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v: %w", startTimeout, last)
		}
		select {
		case <-p.Done():
		case <-time.After(pollInterval):
		}
	}
}

// checkPID verifies that the server at addr is process pid.
func checkPID(ctx context.Context, addr string, pid int) error {
	info, err := do(ctx, addr, "INFO", "server")
	if err != nil {
		return err
	}
	if got := infoField(info, "process_id"); got != strconv.Itoa(pid) {
		return fmt.Errorf("port answered by process %s, not %d: %w", got, pid, errAddrInUse)
	}
	return nil
}

// infoField returns the value of "key:value" in an INFO or CLUSTER INFO
// reply, or "" if absent.
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}
