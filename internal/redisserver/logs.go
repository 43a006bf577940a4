package redisserver

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxTail bounds the log excerpt attached to errors, per file.
const maxTail = 4096

// logOffsets records the sizes of the log files before a start attempt so
// that an error shows only what that attempt wrote.
type logOffsets struct{ log, stderr int64 }

func (s *Server) offsets() logOffsets {
	return logOffsets{
		log:    fileSize(filepath.Join(s.dir, logName)),
		stderr: fileSize(filepath.Join(s.dir, stderrName)),
	}
}

// logTail returns the end of redis.log and stderr.log written after off.
func (s *Server) logTail(off logOffsets) string {
	var b strings.Builder
	for _, f := range []struct {
		name string
		off  int64
	}{{stderrName, off.stderr}, {logName, off.log}} {
		if tail := readTail(filepath.Join(s.dir, f.name), f.off); tail != "" {
			b.WriteString("--- " + f.name + "\n" + tail)
		}
	}
	if b.Len() == 0 {
		return "(empty)"
	}
	return b.String()
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readTail reads path from off, keeping at most the last maxTail bytes.
func readTail(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if size := fileSize(path); size-off > maxTail {
		off = size - maxTail
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTail))
	if err != nil {
		return ""
	}
	return string(b)
}
