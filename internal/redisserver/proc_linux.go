package redisserver

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// sysProcAttr puts redis-server in its own process group (so Kill reaches
// forked children and a terminal's Ctrl-C does not) and makes the kernel
// SIGKILL it when the test binary dies. Pdeathsig fires when the creating OS
// thread exits; Go only ends threads of goroutines that exit while locked
// with runtime.LockOSThread, which this package never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitStopped polls /proc until pid is in the stopped state ('T') or
// timeout passes.
func waitStopped(pid int, timeout time.Duration) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		// The state follows the parenthesised command name.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		time.Sleep(10 * time.Millisecond) // bounded polling, see deadline
	}
}
