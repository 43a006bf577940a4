package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// Bounds of reportWait: each inspection, and the pause between them.
const (
	waitInspectTimeout = 2 * time.Second
	waitPollEvery      = 2 * time.Second
)

// reportWait tells a -v user of `run` whom it waits for. It inspects key
// once, at once: if another owner holds it, it writes one line naming the
// key, the holder (as status shows it), its fence, and how long the
// holder's lease still runs, when the store says. Then it inspects again
// every waitPollEvery in the background and writes a line only when the
// key changes hands while run still waits (a new fence seen twice in a row,
// so that run's own grant, seen just before Lock returns, is not reported).
// A store without an Inspector, or an inspection that fails, says nothing
// (the unreachable store has its own lines). The returned stop ends the
// background inspections and waits for them; call it once Lock returned.
func reportWait(ctx context.Context, w io.Writer, store driver.Mutex, key, until string) (stop func()) {
	in, ok := driver.As[driver.Inspector](store)
	if !ok {
		return func() {}
	}
	look := func() (driver.Info, bool) {
		ictx, cancel := context.WithTimeout(ctx, waitInspectTimeout)
		defer cancel()
		info, err := in.Inspect(ictx, key)
		return info, err == nil && info.Held
	}
	var last uint64 // fence of the holder last reported; 0: none
	if info, held := look(); held {
		fmt.Fprintf(w, "dlock: waiting for lock %q: %s; trying %s\n", key, describeHolder(key, info), until)
		last = info.Fence
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(waitPollEvery)
		defer t.Stop()
		var seen uint64 // a new fence seen at the previous look, not yet reported
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			info, held := look()
			switch {
			case !held || info.Fence == last:
				seen = 0
			case info.Fence != seen:
				seen = info.Fence
			default:
				last, seen = info.Fence, 0
				fmt.Fprintf(w, "dlock: lock %q changed hands while waiting: %s\n", key, describeHolder(key, info))
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// describeHolder is a held key's holder for reportWait's lines.
func describeHolder(key string, info driver.Info) string {
	fence := fmt.Sprintf("fence %d", info.Fence)
	if info.Held && info.Meta != "" {
		fence += "; " + info.Meta
	}
	s := fmt.Sprintf("held by %s (%s)", strings.Trim(lockStatusOf(key, info).holderText(), "()"), fence)
	if info.Remaining >= 0 {
		s += fmt.Sprintf(", whose lease runs %v more unless renewed", roundDur(info.Remaining))
	}
	return s
}
