//go:build !linux

package inventory

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
