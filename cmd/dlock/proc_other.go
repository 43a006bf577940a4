//go:build unix && !linux

package main

import "syscall"

// childSysProcAttr puts the command in a process group of its own, so that
// run can signal everything it started. (Only Linux can also have the kernel
// kill it when run dies.)
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
