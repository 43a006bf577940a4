//go:build unix && !linux

package main

import (
	"io"
	"syscall"
)

// childSysProcAttr puts the command in a process group of its own, so that
// run can signal everything it started. (Only on Linux does the command also
// die with run, and take the terminal's foreground.)
func childSysProcAttr(io.Reader) (*syscall.SysProcAttr, func()) {
	return &syscall.SysProcAttr{Setpgid: true}, func() {}
}

// becomeSubreaper does nothing: only Linux has child subreapers. The
// command's orphans go to init, which reaps them.
func becomeSubreaper() {}
