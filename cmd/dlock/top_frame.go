package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"example.com/dlock/driver"
)

// Orders of `dlock top --sort`.
const (
	sortKey     = "key"     // by key
	sortTTL     = "ttl"     // soonest expiry first, unknown last
	sortFence   = "fence"   // highest fence (newest holding) first
	sortWaiters = "waiters" // most waiters first, unknown last
)

// checkSort refuses a --sort top does not know, before any I/O.
func checkSort(by string) error {
	switch by {
	case sortKey, sortTTL, sortFence, sortWaiters:
		return nil
	}
	return exitWith(ExitUsage, fmt.Errorf("top: --sort %q: want key, ttl, fence or waiters", by))
}

// topFrame is one frame of `dlock top`; its JSON (--once --json) is
// documented in docs/cli.md ("JSON output").
type topFrame struct {
	At          string       `json:"at"`          // when the frame was read, RFC 3339 UTC
	Locks       []lockStatus `json:"locks"`       // held locks, with waiters where the store counts them
	RWLocks     []familyRow  `json:"rwlocks"`     // read-write locks in use; [] when none or not listable
	Semaphores  []familyRow  `json:"semaphores"`  // semaphores with permits out; [] when none or not listable
	Unsupported []string     `json:"unsupported"` // kinds this store cannot list: rwlock, semaphore
}

// readFrame lists what pattern matches: the held locks (a store without a
// driver.Lister gives ExitUsage, as list does) with their waiter counts
// where the store has a driver.WaiterCounter, and the read-write locks and
// semaphores where it can list them (the others named in Unsupported).
// Each part is ordered by sortBy. It changes nothing.
func readFrame(ctx context.Context, store driver.Mutex, pattern, sortBy string, now time.Time) (topFrame, error) {
	f := topFrame{At: now.UTC().Format(time.RFC3339Nano), RWLocks: []familyRow{}, Semaphores: []familyRow{}, Unsupported: []string{}}
	var err error
	if f.Locks, err = listLocks(ctx, store, pattern); err != nil {
		return f, err
	}
	if wc, ok := driver.As[driver.WaiterCounter](store); ok {
		for i := range f.Locks {
			if n, err := wc.Waiters(ctx, f.Locks[i].Key); err == nil {
				f.Locks[i].Waiters = &n
			}
		}
	}
	if _, ok := driver.As[driver.RWLister](store); !ok {
		f.Unsupported = append(f.Unsupported, kindRWLock)
	} else if f.RWLocks, err = listFamily(ctx, store, kindRWLock, pattern); err != nil {
		return f, err
	}
	if _, ok := driver.As[driver.PermitLister](store); !ok {
		f.Unsupported = append(f.Unsupported, kindSemaphore)
	} else if f.Semaphores, err = listFamily(ctx, store, kindSemaphore, pattern); err != nil {
		return f, err
	}
	sortFrame(&f, sortBy)
	return f, nil
}

// topRow is one line of the text view: a lock, a read-write holding (or a
// read-write lock with only a queued writer) or a semaphore holding.
type topRow struct {
	key, kind, holder, meta string
	ttl                     int64  // ms; -1 unknown or none
	fence                   uint64 // 0 none
	waiters                 int    // -1 unknown
	waitersText             string
}

// rowOrder compares two rows under sortBy, ties by key then fence.
func rowOrder(sortBy string) func(a, b topRow) int {
	unknownLast := func(a, b int64) int { // ascending, -1 last
		if (a < 0) != (b < 0) {
			return cmp.Compare(b, a)
		}
		return cmp.Compare(a, b)
	}
	return func(a, b topRow) int {
		var c int
		switch sortBy {
		case sortTTL:
			c = unknownLast(a.ttl, b.ttl)
		case sortFence:
			c = cmp.Compare(b.fence, a.fence)
		case sortWaiters:
			c = cmp.Compare(b.waiters, a.waiters) // -1 (unknown) after 0
		}
		return cmp.Or(c, strings.Compare(a.key, b.key), compareFence(a.fence, b.fence))
	}
}

// sortFrame orders each part of f by sortBy; a read-write lock or a
// semaphore sorts by its soonest-expiring holding, its highest fence, and
// (waiters) a queued writer counting as one.
func sortFrame(f *topFrame, sortBy string) {
	order := rowOrder(sortBy)
	slices.SortStableFunc(f.Locks, func(a, b lockStatus) int { return order(lockRow(a), lockRow(b)) })
	fam := func(a, b familyRow) int { return order(familySummary(a), familySummary(b)) }
	slices.SortStableFunc(f.RWLocks, fam)
	slices.SortStableFunc(f.Semaphores, fam)
}

func lockRow(s lockStatus) topRow {
	r := topRow{key: s.Key, kind: "lock", holder: s.holderText(), meta: s.Meta, ttl: s.ttl(), fence: s.Fence, waiters: -1, waitersText: "?"}
	if s.Holds > 1 {
		r.kind = fmt.Sprintf("lock (%d holds)", s.Holds)
	}
	if s.Waiters != nil {
		r.waiters, r.waitersText = *s.Waiters, fmt.Sprint(*s.Waiters)
	}
	return r
}

// familySummary is the sort key of a read-write lock or a semaphore.
func familySummary(r familyRow) topRow {
	s := topRow{key: r.Key, ttl: -1, waiters: -1}
	var hs []holderStatus
	if r.RW != nil {
		hs, s.waiters = r.RW.holders(), map[bool]int{true: 1}[r.RW.WriterWaiting]
	} else {
		hs = r.Sem.Holders
	}
	for _, h := range hs {
		s.fence = max(s.fence, h.Fence)
		if h.TTLms >= 0 && (s.ttl < 0 || h.TTLms < s.ttl) {
			s.ttl = h.TTLms
		}
	}
	return s
}

// familyRows are the text lines of a read-write lock or a semaphore.
func familyRows(r familyRow) []topRow {
	var rows []topRow
	if r.RW != nil {
		queued := map[bool]string{true: "writer queued", false: "-"}[r.RW.WriterWaiting]
		n := map[bool]int{true: 1}[r.RW.WriterWaiting]
		hs := r.RW.holders()
		if len(hs) == 0 {
			return []topRow{{key: r.Key, kind: "rwlock " + r.RW.Mode, holder: "-", ttl: -1, waiters: n, waitersText: queued}}
		}
		for _, h := range hs {
			rows = append(rows, topRow{key: r.Key, kind: "rwlock " + r.RW.Mode, holder: h.holderText(), ttl: h.TTLms, fence: h.Fence, waiters: n, waitersText: queued})
		}
		return rows
	}
	for _, h := range r.Sem.Holders {
		kind := fmt.Sprintf("semaphore %d/%d ×%d", r.Sem.Used, r.Sem.Limit, h.Permits)
		rows = append(rows, topRow{key: r.Key, kind: kind, holder: h.holderText(), ttl: h.TTLms, fence: h.Fence, waiters: -1, waitersText: "-"})
	}
	return rows
}

// printFrame writes f as text: a heading line, then one table of locks,
// read-write holdings and semaphore holdings, ordered by sortBy.
func printFrame(w io.Writer, f topFrame, pattern, sortBy string) {
	at, _ := time.Parse(time.RFC3339Nano, f.At)
	nl, nr, ns := len(f.Locks), len(f.RWLocks), len(f.Semaphores)
	fmt.Fprintf(w, "dlock top %s  %s  sort %s: %d lock%s, %d read-write lock%s, %d semaphore%s\n",
		pattern, at.Format("15:04:05 UTC"), sortBy, nl, plural(nl), nr, plural(nr), ns, plural(ns))
	if len(f.Unsupported) > 0 {
		names := map[string]string{kindRWLock: "read-write locks", kindSemaphore: "semaphores"}
		var cannot []string
		for _, k := range f.Unsupported {
			cannot = append(cannot, names[k])
		}
		fmt.Fprintf(w, "this store cannot list %s\n", strings.Join(cannot, " or "))
	}
	var rows []topRow
	for _, l := range f.Locks {
		rows = append(rows, lockRow(l))
	}
	for _, r := range append(slices.Clone(f.RWLocks), f.Semaphores...) {
		rows = append(rows, familyRows(r)...)
	}
	slices.SortStableFunc(rows, rowOrder(sortBy))
	if len(rows) == 0 {
		fmt.Fprintln(w, "nothing held")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tHOLDER\tTTL\tFENCE\tWAITERS\tMETA")
	for _, r := range rows {
		fence := "-"
		if r.fence > 0 || r.kind == "lock" {
			fence = fmt.Sprint(r.fence)
		}
		ttl := ttlText(r.ttl)
		if r.holder == "-" { // a read-write lock with only a queued writer
			ttl = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.key, r.kind, r.holder, ttl, fence, r.waitersText, r.meta)
	}
	_ = tw.Flush()
}
