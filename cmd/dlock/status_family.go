package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// rwStatus is the read-write lock KEY in `dlock status --json` ("rwlock"):
// its readers or its writer, and the writer-waiting mark. Its JSON is
// documented in docs/cli.md ("JSON output").
type rwStatus struct {
	Mode            string         `json:"mode"`              // none, read or write
	Readers         []holderStatus `json:"readers"`           // the read holdings; [] when none
	Writer          *holderStatus  `json:"writer,omitempty"`  // the write holding
	WriterWaiting   bool           `json:"writer_waiting"`    // a writer is queued: readers that arrive now are kept out
	WriterWaitingMs int64          `json:"writer_waiting_ms"` // the mark's remaining time; 0 without one
}

// semStatus is the semaphore KEY in `dlock status --json` ("semaphore").
type semStatus struct {
	Limit   int            `json:"limit"` // the stored N; 0 when no permit is out
	Used    int            `json:"used"`
	Holders []holderStatus `json:"holders"` // [] when none
}

// holderStatus is one holding of a read-write lock or a semaphore.
type holderStatus struct {
	Holder  string `json:"holder,omitempty"` // the token's first characters (abbrev); "" when unknown
	Permits int    `json:"permits,omitempty"`
	Fence   uint64 `json:"fence"`
	TTLms   int64  `json:"ttl_ms"` // the remaining lease; -1 when unknown

	role string // reader or writer, for the text output
}

// holderText is the holder as status prints it.
func (h holderStatus) holderText() string {
	if h.Holder == "" {
		return "(a dlock client, token unknown)"
	}
	return h.Holder + "…"
}

// busy reports whether the read-write lock is held or a writer waits.
func (s *rwStatus) busy() bool {
	return s != nil && (s.Mode != driver.RWMode(0).String() || s.WriterWaiting)
}

// holders are the writer, or the readers by fence.
func (s *rwStatus) holders() []holderStatus {
	if s.Writer != nil {
		return []holderStatus{*s.Writer}
	}
	return s.Readers
}

// rwStatusOf is the displayed state of a read-write lock: readers by fence.
func rwStatusOf(info driver.RWInfo) *rwStatus {
	s := &rwStatus{Mode: info.Mode.String(), Readers: []holderStatus{}, WriterWaitingMs: info.WriterWaiting.Milliseconds()}
	s.WriterWaiting = info.WriterWaiting > 0
	for _, h := range info.Holders {
		hs := holderStatus{Holder: abbrev(h.Token), Fence: h.Fence, TTLms: ttlMs(h.Remaining.Milliseconds()), role: "reader"}
		if h.Mode == driver.RWWrite {
			hs.role = "writer"
			s.Writer = &hs
			continue
		}
		s.Readers = append(s.Readers, hs)
	}
	slices.SortFunc(s.Readers, func(a, b holderStatus) int { return compareFence(a.Fence, b.Fence) })
	return s
}

// semStatusOf is the displayed state of a semaphore: holders by fence.
func semStatusOf(info driver.PermitInfo) *semStatus {
	s := &semStatus{Limit: info.Limit, Used: info.Used, Holders: []holderStatus{}}
	for _, h := range info.Holders {
		s.Holders = append(s.Holders, holderStatus{Holder: abbrev(h.Token), Permits: h.Permits, Fence: h.Fence, TTLms: ttlMs(h.Remaining.Milliseconds())})
	}
	slices.SortFunc(s.Holders, func(a, b holderStatus) int { return compareFence(a.Fence, b.Fence) })
	return s
}

func ttlMs(ms int64) int64 {
	if ms < 0 {
		return -1
	}
	return ms
}

func compareFence(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// inspectFamily adds to s the read-write lock and the semaphore of the same
// key, where the store can inspect them (driver.RWInspector,
// driver.PermitInspector). s keeps nil for what it cannot inspect, and for
// what it cannot inspect right now (errors.ErrUnsupported) or refuses to
// (dlock.ErrRefused: a Redis user whose ACL allows the lock's scripts
// only), so that the lock's state is still shown. Other errors are as for
// inspect.
func inspectFamily(ctx context.Context, store driver.Mutex, s *lockStatus) error {
	if in, ok := driver.As[driver.RWInspector](store); ok {
		info, err := in.InspectRW(ctx, s.Key)
		if err == nil {
			s.RW = rwStatusOf(info)
		} else if !leaveOut(err) {
			return exitFor(err)
		}
	}
	if in, ok := driver.As[driver.PermitInspector](store); ok {
		info, err := in.InspectPermits(ctx, s.Key)
		if err == nil {
			s.Sem = semStatusOf(info)
		} else if !leaveOut(err) {
			return exitFor(err)
		}
	}
	return nil
}

// leaveOut reports whether a failed inspection of the read-write lock or
// the semaphore leaves its part out of status rather than failing it.
func leaveOut(err error) bool {
	return errors.Is(err, errors.ErrUnsupported) || errors.Is(err, dlock.ErrRefused)
}

// printFamily prints the read-write lock and the semaphore of s's key
// when something holds them (or a writer waits): a key used as a mutex
// only prints as it always did.
func printFamily(w io.Writer, s lockStatus) {
	if s.RW.busy() {
		line := "free"
		switch {
		case s.RW.Writer != nil:
			line = "held by a writer"
		case len(s.RW.Readers) > 0:
			line = fmt.Sprintf("held by %d reader%s", len(s.RW.Readers), plural(len(s.RW.Readers)))
		}
		if s.RW.WriterWaiting {
			line += fmt.Sprintf("; a writer is queued (mark ends in %v unless renewed)", roundDur(msDur(s.RW.WriterWaitingMs)))
		}
		fmt.Fprintf(w, "rwlock:   %s\n", line)
		for _, h := range s.RW.holders() {
			fmt.Fprintf(w, "  %-8s %s  fence %d  ttl %s\n", h.role, h.holderText(), h.Fence, ttlText(h.TTLms))
		}
	}
	if s.Sem != nil && s.Sem.Used > 0 {
		fmt.Fprintf(w, "permits:  %d of %d used\n", s.Sem.Used, s.Sem.Limit)
		for _, h := range s.Sem.Holders {
			fmt.Fprintf(w, "  holder   %s  %d permit%s  fence %d  ttl %s\n", h.holderText(), h.Permits, plural(h.Permits), h.Fence, ttlText(h.TTLms))
		}
	}
}

func ttlText(ms int64) string {
	if ms < 0 {
		return "unknown"
	}
	return roundDur(msDur(ms)).String()
}
