package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// Kinds of `dlock list --kind`.
const (
	kindMutex     = "mutex"
	kindRWLock    = "rwlock"
	kindSemaphore = "semaphore"
)

// familyRow is one row of `dlock list --kind rwlock` or `--kind semaphore`
// (docs/cli.md, "JSON output").
type familyRow struct {
	Key string     `json:"key"`
	RW  *rwStatus  `json:"rwlock,omitempty"`
	Sem *semStatus `json:"semaphore,omitempty"`
}

// checkKind refuses a --kind list does not know, before any I/O.
func checkKind(kind string) error {
	switch kind {
	case kindMutex, kindRWLock, kindSemaphore:
		return nil
	}
	return exitWith(ExitUsage, fmt.Errorf("list: --kind %q: want mutex, rwlock or semaphore", kind))
}

// listFamily lists the read-write locks (kind rwlock) or semaphores (kind
// semaphore) in use whose key matches pattern, through the store's
// RWLister or PermitLister, sorted by key. A store without the lister gives
// ExitUsage; errors are otherwise as for listLocks.
func listFamily(ctx context.Context, store driver.Mutex, kind, pattern string) ([]familyRow, error) {
	rows := []familyRow{}
	var err error
	switch kind {
	case kindRWLock:
		l, ok := driver.As[driver.RWLister](store)
		if !ok {
			return nil, exitWith(ExitUsage, errors.New("this store cannot list read-write locks (it has no driver.RWLister); use dlock status KEY"))
		}
		err = l.ListRW(ctx, globPrefix(pattern), func(key string, info driver.RWInfo) bool {
			if globMatch(pattern, key) {
				rows = append(rows, familyRow{Key: key, RW: rwStatusOf(info)})
			}
			return ctx.Err() == nil
		})
	default:
		l, ok := driver.As[driver.PermitLister](store)
		if !ok {
			return nil, exitWith(ExitUsage, errors.New("this store cannot list semaphores (it has no driver.PermitLister); use dlock status KEY"))
		}
		err = l.ListPermits(ctx, globPrefix(pattern), func(key string, info driver.PermitInfo) bool {
			if globMatch(pattern, key) {
				rows = append(rows, familyRow{Key: key, Sem: semStatusOf(info)})
			}
			return ctx.Err() == nil
		})
	}
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return nil, exitWith(ExitUnavailable, fmt.Errorf("list: the store cannot list now: %w", plain(err)))
	case errors.Is(err, dlock.ErrRefused):
		return nil, exitWith(ExitRefused, fmt.Errorf("list: %w", plain(err)))
	case err != nil:
		return nil, exitFor(fmt.Errorf("list: %w", err))
	case ctx.Err() != nil:
		return nil, exitFor(ctx.Err())
	}
	slices.SortFunc(rows, func(a, b familyRow) int { return strings.Compare(a.Key, b.Key) })
	return rows, nil
}

// printFamilyList prints one line per holding (a read-write lock with
// only a queued writer gets one line without a holder).
func printFamilyList(w io.Writer, kind string, rows []familyRow) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "no %s in use\n", map[string]string{kindRWLock: "read-write locks", kindSemaphore: "semaphores"}[kind])
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if kind == kindRWLock {
		fmt.Fprintln(tw, "KEY\tMODE\tHOLDER\tTTL\tFENCE\tWRITER QUEUED")
	} else {
		fmt.Fprintln(tw, "KEY\tUSED\tHOLDER\tPERMITS\tTTL\tFENCE")
	}
	for _, r := range rows {
		if r.RW != nil {
			queued := map[bool]string{true: "yes", false: "no"}[r.RW.WriterWaiting]
			hs := r.RW.holders()
			if len(hs) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t%s\n", r.Key, r.RW.Mode, queued)
			}
			for _, h := range hs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.Key, r.RW.Mode, h.holderText(), ttlText(h.TTLms), h.Fence, queued)
			}
			continue
		}
		for _, h := range r.Sem.Holders {
			fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%d\t%s\t%d\n", r.Key, r.Sem.Used, r.Sem.Limit, h.holderText(), h.Permits, ttlText(h.TTLms), h.Fence)
		}
	}
	_ = tw.Flush()
}
