package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// openStore connects to the store for `dlock run`. Without --wait, or with
// --wait 0, an unreachable store ends run at once (ExitUnavailable): a
// mistyped address should not hang forever. With a positive --wait the store
// is waited for until deadline: run says so on stderr and goes on with the
// store opened but not yet reached (the lock's wait then retries it, and rep,
// told since when the store is unreachable, reports the wait). A store whose
// opener dials (etcd, ZooKeeper, MySQL) is opened again until deadline
// (openUntil); a signal in sigs ends that wait with ExitNotAcquired.
func (f *runFlags) openStore(ctx context.Context, stderr io.Writer, rep *unreachableReporter, deadline time.Time, sigs <-chan os.Signal) (*openedStore, error) {
	if !f.waitSet || f.wait == 0 {
		return f.store.connect(ctx)
	}
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	st, err := f.store.connect(cctx)
	var ee *exitError
	if err == nil || !errors.As(err, &ee) || ee.code != ExitUnavailable || !time.Now().Before(deadline) {
		return st, err
	}
	fmt.Fprintf(stderr, "dlock: %s; waiting for it (--wait %v)\n", unprefixed(err), f.wait)
	rep.mu.Lock()
	rep.since = start
	rep.mu.Unlock()
	return f.openUntil(ctx, rep, deadline, sigs)
}

// Pauses between openUntil's attempts: doubling from the first to the last.
const (
	reopenFirst = 100 * time.Millisecond
	reopenMax   = 2 * time.Second
)

// openUntil opens the store, and while the opener finds it unreachable
// (ExitUnavailable) opens it again after a pause, telling rep, until
// deadline: then the last error, as an ExitUnavailable that names the wait.
// A signal in sigs ends the wait with ExitNotAcquired, as it ends a wait
// for the lock; any other error ends it at once.
func (f *runFlags) openUntil(ctx context.Context, rep *unreachableReporter, deadline time.Time, sigs <-chan os.Signal) (*openedStore, error) {
	pause := reopenFirst
	for {
		octx, cancel := context.WithDeadline(ctx, deadline)
		st, err := f.store.open(octx)
		cancel()
		var ee *exitError
		if err == nil || !errors.As(err, &ee) || ee.code != ExitUnavailable {
			return st, err
		}
		if !errors.Is(err, dlock.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", dlock.ErrUnavailable, ee.err)
		}
		rep.retry(0, err)
		left := time.Until(deadline)
		if left <= 0 {
			return nil, exitWith(ExitUnavailable, fmt.Errorf("lock %q not acquired within --wait %v: the store stayed unreachable (last attempt: %w)", f.key, f.wait, plain(ee.err)))
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-t.C:
		case s := <-sigs:
			t.Stop()
			return nil, exitWith(ExitNotAcquired, fmt.Errorf("lock %q not acquired: interrupted by %s while waiting for the store", f.key, signalName(s)))
		}
		pause = min(2*pause, reopenMax)
	}
}

// waitHint says how long run keeps trying, for the stderr lines.
func (f *runFlags) waitHint() string {
	if f.waitSet {
		return fmt.Sprintf("until --wait %v runs out", f.wait)
	}
	return "with no end (no --wait given)"
}

// Reporting intervals of unreachableReporter: the first line once the store
// has been unreachable this long, then one line per repeat at most.
const (
	unreachableFirst  = time.Second
	unreachableRepeat = 10 * time.Second
)

// unreachableReporter is run's WithOnRetry callback: it tells the user on
// stderr that the wait goes on because the store cannot be reached (not
// because another owner holds the lock), after about a second of failures
// and then every 10 s, so that a wrong address or a dead server is not a
// silent hang.
type unreachableReporter struct {
	w     io.Writer
	key   string
	until string           // how long run keeps trying, for the message
	now   func() time.Time // time.Now unless a test sets it
	mu    sync.Mutex       // retry runs on the waiting goroutine; tests read lines
	since time.Time        // first failure of the current unreachable spell; zero if none
	last  time.Time        // last line written; zero if none in this spell
	lines int              // lines written, for tests
}

// retry implements the dlock.WithOnRetry callback.
func (r *unreachableReporter) retry(_ int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	if !errors.Is(err, dlock.ErrUnavailable) {
		r.since, r.last = time.Time{}, time.Time{} // the store answered: a new spell starts afresh
		return
	}
	if r.since.IsZero() {
		r.since = now
	}
	due := r.since.Add(unreachableFirst)
	if !r.last.IsZero() {
		due = r.last.Add(unreachableRepeat)
	}
	if now.Before(due) {
		return
	}
	r.last = now
	r.lines++
	fmt.Fprintf(r.w, "dlock: waiting for lock %q: the store has been unreachable for %v (%s); still trying %s\n",
		r.key, roundDur(now.Sub(r.since)), unprefixed(err), r.until)
}

// contendedMessage is the CLI's own text for a lock held by another owner:
// the library's ContendedError gives the holder's remaining lease unrounded
// and without saying what the duration is.
type contendedMessage struct {
	msg string
	err error
}

func (e *contendedMessage) Error() string { return e.msg }
func (e *contendedMessage) Unwrap() error { return e.err }

// notAcquiredError explains a wait that ended on a held lock, naming the
// holder's remaining lease (rounded) when the store reported it. It still
// matches everything err matches.
func notAcquiredError(f *runFlags, err error) error {
	within := " (--wait 0: a single try)"
	switch {
	case !f.waitSet:
	case f.wait > 0:
		within = fmt.Sprintf(" within --wait %v", f.wait)
	}
	if why := takenWhy(err); why != "" { // a read-write lock or a semaphore
		return &contendedMessage{msg: fmt.Sprintf("%s not acquired%s: %s", f.what(), within, why), err: err}
	}
	var ce *driver.ContendedError
	if !errors.As(err, &ce) {
		return plain(err)
	}
	why := "held by another owner"
	if ce.Remaining >= 0 {
		why += fmt.Sprintf(" (remaining lease %v)", roundDur(ce.Remaining))
	}
	return &contendedMessage{msg: fmt.Sprintf("lock %q not acquired%s: %s", f.key, within, why), err: err}
}
