package main

import "syscall"

// childSysProcAttr puts the command in a process group of its own, so that
// run can signal everything it started, and has the kernel kill it if run
// itself dies (SIGKILL, OOM): the lock would then expire while the command
// ran on unprotected.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
