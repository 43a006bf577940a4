package inventory

import "syscall"

// sysProcAttr makes the kernel kill an instance when the demo dies, so a
// crashed demo leaves no servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
