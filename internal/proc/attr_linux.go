package proc

import "syscall"

// sysProcAttr returns a with its own process group when group, and a
// SIGKILL from the kernel when the test binary dies. Pdeathsig fires when
// the creating OS thread exits; Go only ends threads of goroutines that exit
// while locked with runtime.LockOSThread, which no launcher does.
func sysProcAttr(a *syscall.SysProcAttr, group bool) *syscall.SysProcAttr {
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	a.Setpgid = group
	a.Pdeathsig = syscall.SIGKILL
	return a
}
