package proc

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ErrNotRunning is returned by Handle.Signal when no process is running.
var ErrNotRunning = errors.New("proc: not running")

// Handle holds a launcher's current process, if any, and the log of the
// last one started, under a lock: what a server's Kill, Stop, Restart,
// Pause, Running and Log share. Its zero value holds nothing. All methods
// are safe for concurrent use.
type Handle struct {
	mu  sync.Mutex
	p   *Process
	log *Log
}

// Start starts cmd in mode with its output going to a new Log, and holds
// it. On failure nothing runs, the Log stays (empty) and the error is
// exec's.
func (h *Handle) Start(cmd *exec.Cmd, mode Mode) error {
	log := &Log{}
	cmd.Stdout, cmd.Stderr = log, log
	p, err := Start(cmd, mode)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = log
	if err != nil {
		return err
	}
	h.p = p
	return nil
}

// Take lets go of the running process and returns it, or nil.
func (h *Handle) Take() *Process {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.p
	h.p = nil
	return p
}

// Current returns the held process (running or exited by itself), or nil.
func (h *Handle) Current() *Process {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.p
}

// Kill lets go of the process and kills it (see Process.Kill). Harmless
// when none is held.
func (h *Handle) Kill() {
	if p := h.Take(); p != nil {
		p.Kill()
	}
}

// Stop lets go of the process and stops it with sig, killing it after
// timeout (see Process.Stop). Harmless when none is held.
func (h *Handle) Stop(sig syscall.Signal, timeout time.Duration) {
	if p := h.Take(); p != nil {
		p.Stop(sig, timeout)
	}
}

// Held reports whether a process was started and not taken (killed,
// stopped) since; it may have exited by itself.
func (h *Handle) Held() bool { return h.Current() != nil }

// Exited reports whether the held process has exited by itself.
func (h *Handle) Exited() bool {
	p := h.Current()
	return p != nil && p.Exited()
}

// Signal sends sig to the held process (see Process.Signal), or returns
// ErrNotRunning when none is held.
func (h *Handle) Signal(sig syscall.Signal) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p == nil {
		return ErrNotRunning
	}
	return h.p.Signal(sig)
}

// Log returns the output of the last process started (its latest part when
// it grew large), "" before any.
func (h *Handle) Log() string {
	h.mu.Lock()
	log := h.log
	h.mu.Unlock()
	return log.String()
}
