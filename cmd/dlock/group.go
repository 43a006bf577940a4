package main

import (
	"syscall"
	"time"
)

// groupKillBound bounds the wait for a process group after its SIGKILL: a
// process in uninterruptible sleep dies only when the kernel lets it.
const groupKillBound = 5 * time.Second

// groupPoll is how often awaitGroup looks for the group's last process.
const groupPoll = 10 * time.Millisecond

// stopGroup ends what is left of the process group pgid once its leader has
// exited and been reaped: it sends first (SIGTERM or SIGKILL) to the group,
// SIGKILL after grace if anything is left, and waits until no process of the
// group is left, reaping those that are run's children (on Linux the binary
// is a child subreaper, so the command's orphans are). It reports whether
// the group is gone; false only if a process outlived its SIGKILL by
// groupKillBound.
func stopGroup(pgid int, first syscall.Signal, grace time.Duration) bool {
	if awaitGroup(pgid, 0) {
		return true
	}
	_ = syscall.Kill(-pgid, first)
	if first != syscall.SIGKILL {
		if awaitGroup(pgid, grace) {
			return true
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return awaitGroup(pgid, groupKillBound)
}

// awaitGroup reaps the exited processes of group pgid that are run's
// children and reports whether none is left, looking again every groupPoll
// for at most d.
func awaitGroup(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(groupPoll, left))
	}
}
