package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// waitReporter starts run -v's report of whom run waits for; the returned
// stop ends it and waits for it.
type waitReporter func(ctx context.Context, w io.Writer, key, until string) (stop func())

func noReport(context.Context, io.Writer, string, string) func() { return func() {} }

// lookFunc inspects a key for pollReport: what holds it, in words, and a
// signature of its holders that changes when they do; busy is false when
// nothing holds it or the inspection failed.
type lookFunc func(ctx context.Context) (desc, sig string, busy bool)

// rwReporter is run -v's report for --shared and --exclusive: the
// holdings of the read-write lock (readers or the writer, each with its
// holder, fence and remaining lease) and the writer-waiting mark, where the
// store can inspect them (driver.RWInspector).
func rwReporter(rw driver.RWMutex) waitReporter {
	in, ok := driver.As[driver.RWInspector](rw)
	if !ok {
		return noReport
	}
	return func(ctx context.Context, w io.Writer, key, until string) func() {
		return pollReport(ctx, w, "read-write lock "+quote(key), until, func(ctx context.Context) (string, string, bool) {
			info, err := in.InspectRW(ctx, key)
			if err != nil || len(info.Holders) == 0 && info.WriterWaiting <= 0 {
				return "", "", false
			}
			s := rwStatusOf(info)
			return s.describe(), s.signature(), true
		})
	}
}

// permitReporter is run -v's report for --permits: the permits out of the
// semaphore and their holders, where the store can inspect them
// (driver.PermitInspector). A semaphore with free permits is not reported.
func permitReporter(sem driver.Semaphore) waitReporter {
	in, ok := driver.As[driver.PermitInspector](sem)
	if !ok {
		return noReport
	}
	return func(ctx context.Context, w io.Writer, key, until string) func() {
		return pollReport(ctx, w, "semaphore "+quote(key), until, func(ctx context.Context) (string, string, bool) {
			info, err := in.InspectPermits(ctx, key)
			if err != nil || info.Used < max(info.Limit, 1) {
				return "", "", false
			}
			s := semStatusOf(info)
			return s.describe(), s.signature(), true
		})
	}
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// pollReport is reportWait for the read-write lock and the semaphore: one
// line at once if something holds what, then one when its holders change
// while run still waits (a new signature seen twice in a row, so that run's
// own grant, seen just before the wait ends, is not reported).
func pollReport(ctx context.Context, w io.Writer, what, until string, look lookFunc) (stop func()) {
	lookNow := func() (string, string, bool) {
		ictx, cancel := context.WithTimeout(ctx, waitInspectTimeout)
		defer cancel()
		return look(ictx)
	}
	var last string // signature last reported
	if desc, sig, busy := lookNow(); busy {
		fmt.Fprintf(w, "dlock: waiting for %s: %s; trying %s\n", what, desc, until)
		last = sig
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(waitPollEvery)
		defer t.Stop()
		var seen string // a new signature seen at the previous look, not yet reported
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			desc, sig, busy := lookNow()
			switch {
			case !busy || sig == last:
				seen = ""
			case sig != seen:
				seen = sig
			default:
				last, seen = sig, ""
				fmt.Fprintf(w, "dlock: %s changed hands while waiting: %s\n", what, desc)
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// describe is a read-write lock's state in words, for -v.
func (s *rwStatus) describe() string {
	var parts []string
	for _, h := range s.holders() {
		part := fmt.Sprintf("%s %s (fence %d", h.role, h.holderText(), h.Fence)
		if h.TTLms >= 0 {
			part += fmt.Sprintf(", lease runs %v more unless renewed", roundDur(msDur(h.TTLms)))
		}
		parts = append(parts, part+")")
	}
	d := "free"
	if len(parts) > 0 {
		d = "held by " + strings.Join(parts, ", ")
	}
	if s.WriterWaitingMs > 0 {
		d += "; a writer is queued (readers arriving now are kept out)"
	}
	return d
}

// signature identifies the holdings (not the writer-waiting mark, which
// may be run's own).
func (s *rwStatus) signature() string {
	var fences []string
	for _, h := range s.holders() {
		fences = append(fences, fmt.Sprint(h.Fence))
	}
	slices.Sort(fences)
	return strings.Join(fences, ",")
}

// describe is a semaphore's state in words, for -v.
func (s *semStatus) describe() string {
	var parts []string
	for _, h := range s.Holders {
		part := fmt.Sprintf("%s (%d permit%s, fence %d", h.holderText(), h.Permits, plural(h.Permits), h.Fence)
		if h.TTLms >= 0 {
			part += fmt.Sprintf(", lease runs %v more unless renewed", roundDur(msDur(h.TTLms)))
		}
		parts = append(parts, part+")")
	}
	return fmt.Sprintf("%d of %d permits out, held by %s", s.Used, s.Limit, strings.Join(parts, ", "))
}

func (s *semStatus) signature() string {
	var fences []string
	for _, h := range s.Holders {
		fences = append(fences, fmt.Sprint(h.Fence))
	}
	slices.Sort(fences)
	return strings.Join(fences, ",")
}
