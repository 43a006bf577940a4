package main

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// childSysProcAttr puts the command in a process group of its own, so that
// run can signal everything it started, and has the kernel kill it if run
// itself dies (SIGKILL, OOM): the lock would then expire while the command
// ran on unprotected.
//
// If run is in the foreground of the terminal on its stdin, the command's
// group takes the foreground instead, so an interactive command can read the
// terminal (a background group would be stopped by SIGTTIN) and gets the
// terminal's Ctrl-C itself. The returned restore gives the terminal back.
func childSysProcAttr(stdin io.Reader) (attr *syscall.SysProcAttr, restore func()) {
	attr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	f, ok := stdin.(*os.File)
	if !ok {
		return attr, func() {}
	}
	fd := int(f.Fd())
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || fg != syscall.Getpgrp() {
		return attr, func() {} // not a terminal, or run is a background job
	}
	attr.Foreground, attr.Ctty = true, fd
	return attr, func() {
		// Taking the terminal back from the background raises SIGTTOU.
		signal.Ignore(syscall.SIGTTOU)
		_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, syscall.Getpgrp())
	}
}

// becomeSubreaper makes this process the parent of the command's orphans
// (PR_SET_CHILD_SUBREAPER), so that run can reap what is left of the
// command's process group and know when it is gone; otherwise they would
// go to init, which may leave them as zombies that still count as members
// of the group.
func becomeSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }
