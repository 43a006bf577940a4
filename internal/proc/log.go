package proc

import (
	"bytes"
	"sync"
)

// Log sizes: past logMax bytes the oldest part is dropped down to logKeep.
const (
	logMax  = 4 << 20
	logKeep = 2 << 20
)

// Log is a bounded, concurrency-safe buffer for a process's output: an
// io.Writer for cmd.Stdout and cmd.Stderr that keeps the latest 2 to 4 MiB.
// Its zero value is ready to use.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends b, dropping the oldest output when the log grew past 4 MiB.
// It never fails.
func (l *Log) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > logMax {
		l.buf.Next(l.buf.Len() - logKeep)
	}
	return l.buf.Write(b)
}

// String returns what the log holds; "" for a nil Log.
func (l *Log) String() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
