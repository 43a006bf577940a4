//go:build !linux

package main

import "io"

// keyReader reads no keys outside Linux: the view ends with Ctrl-C.
func keyReader(io.Reader, func(byte)) (restore func()) { return func() {} }
