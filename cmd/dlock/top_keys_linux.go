package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// keyReader, if in is a terminal, turns off its line buffering and echo
// (ICANON, ECHO; signals such as Ctrl-C still work) and calls key with each
// byte typed, on a goroutine of its own, until restore puts the terminal's
// settings back. Otherwise it does nothing.
func keyReader(in io.Reader, key func(byte)) (restore func()) {
	f, ok := in.(*os.File)
	if !ok {
		return func() {}
	}
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {} // not a terminal
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if unix.IoctlSetTermios(fd, unix.TCSETS, &raw) != nil {
		return func() {}
	}
	go func() {
		// Left blocked in Read when the view ends: the process exits then.
		b := make([]byte, 1)
		for {
			if n, err := f.Read(b); err != nil {
				return
			} else if n == 1 {
				key(b[0])
			}
		}
	}()
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}
