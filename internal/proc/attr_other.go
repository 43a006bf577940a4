//go:build unix && !linux

package proc

import "syscall"

// sysProcAttr returns a with its own process group when group. Without
// Pdeathsig, servers outlive a SIGKILLed test binary on this platform.
func sysProcAttr(a *syscall.SysProcAttr, group bool) *syscall.SysProcAttr {
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	a.Setpgid = group
	return a
}
