//go:build unix && !linux

package redisserver

import (
	"syscall"
	"time"
)

// sysProcAttr puts redis-server in its own process group so Kill reaches
// forked children. Without Pdeathsig, servers outlive a SIGKILLed test
// binary on this platform.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped is a no-op: SIGSTOP delivery is not observable portably.
func waitStopped(int, time.Duration) {}
