package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// Modes of `dlock run`: which primitive KEY names.
const (
	modeMutex     = "mutex"     // no flag: the lock (driver.Mutex)
	modeShared    = "shared"    // --shared: a read holding of the read-write lock
	modeExclusive = "exclusive" // --exclusive: the write holding of the read-write lock
	modePermits   = "permits"   // --permits N: one permit of the semaphore of N
)

// rwStores and semStores name the stores the CLI can open that have the
// read-write lock (driver.RWMutex) and the semaphore (driver.Semaphore),
// for the usage error on a store without them. Keep them in step with
// docs/rwlock.md and docs/semaphore.md ("Stores").
const (
	rwStores  = "Redis (redis://, rediss://, redis+cluster://, redis+sentinel://), etcd (etcd://, etcds://), ZooKeeper (zk://), PostgreSQL in both modes (postgres://), MariaDB in lease mode (mysql://)"
	semStores = "Redis (redis://, rediss://, redis+cluster://, redis+sentinel://), etcd (etcd://, etcds://), ZooKeeper (zk://), PostgreSQL and MariaDB in lease mode (postgres://, mysql://)"
)

// familyFlags choose the primitive of `dlock run`: the mutex by default,
// the read-write lock (--shared, --exclusive, as flock -s and -x) or the
// semaphore (--permits N). At most one may be given.
type familyFlags struct {
	shared    bool
	exclusive bool
	limit     int // --permits N; 0 when not given
}

func (f *runFlags) registerFamily(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVarP(&f.shared, "shared", "s", false, "hold a read (shared) holding of the read-write lock KEY: many at once, no writer (as flock -s)")
	fl.BoolVarP(&f.exclusive, "exclusive", "x", false, "hold the write (exclusive) holding of the read-write lock KEY: no reader, no other writer (as flock -x)")
	fl.IntVar(&f.limit, "permits", 0, "hold one of the N permits of the semaphore KEY (N is stored with KEY while permits are out)")
}

// mode is the primitive the flags chose.
func (f *familyFlags) mode() string {
	switch {
	case f.shared:
		return modeShared
	case f.exclusive:
		return modeExclusive
	case f.limit != 0:
		return modePermits
	}
	return modeMutex
}

// validateFamily refuses more than one of --shared, --exclusive and
// --permits, and a --permits below 1, before any I/O.
func (f *runFlags) validateFamily(cmd *cobra.Command) error {
	var given []string
	for _, name := range []string{"shared", "exclusive", "permits"} {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 1 {
		return exitWith(ExitUsage, fmt.Errorf("run: %s and %s exclude each other: choose one primitive (the mutex is the default)", given[0], given[1]))
	}
	if cmd.Flags().Changed("permits") && f.limit < 1 {
		return exitWith(ExitUsage, fmt.Errorf("run: --permits %d: a semaphore needs at least 1 permit", f.limit))
	}
	return nil
}

// holding is what run holds while the command runs: a *dlock.Lease, a
// *dlock.RWHolding or a *dlock.Permit.
type holding interface {
	Key() string
	Fence() uint64
	Done() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
}

// token is h's owner token for DLOCK_TOKEN: only the mutex's lease has one
// that a user can do something with (release it by hand).
func token(h holding) (string, bool) {
	if l, ok := h.(interface{ Token() string }); ok {
		return l.Token(), true
	}
	return "", false
}

// locker acquires the primitive of one run.
type locker struct {
	lock  func(ctx context.Context, key string, opts []dlock.Option) (holding, error)
	close func() // stops what the library started for the primitive
	// report starts run -v's report of whom it waits for (reportWait).
	report func(ctx context.Context, w io.Writer, key, until string) (stop func())
}

// lockerFor returns the locker of f's mode on st; the mutex's holdings
// carry meta (holder metadata). A store without the primitive is a usage
// error naming the stores that have it.
func (f *runFlags) lockerFor(st *openedStore, meta string) (*locker, error) {
	switch mode := f.mode(); mode {
	case modeShared, modeExclusive:
		rw, ok := driver.As[driver.RWMutex](st.Store)
		if !ok {
			return nil, exitWith(ExitUsage, fmt.Errorf("run --%s: %s has no read-write lock (driver.RWMutex); stores that have one: %s", mode, st.Desc, rwStores))
		}
		l, err := dlock.NewRWLocks(rw)
		if err != nil {
			return nil, exitFor(err)
		}
		lock := l.RLock
		if mode == modeExclusive {
			lock = l.Lock
		}
		return &locker{
			lock: func(ctx context.Context, key string, opts []dlock.Option) (holding, error) {
				return nilIfFailed(lock(ctx, key, opts...))
			},
			close:  func() { closeBounded(l.Close) },
			report: rwReporter(rw),
		}, nil
	case modePermits:
		sem, ok := driver.As[driver.Semaphore](st.Store)
		if !ok {
			return nil, exitWith(ExitUsage, fmt.Errorf("run --permits: %s has no semaphore (driver.Semaphore); stores that have one: %s", st.Desc, semStores))
		}
		s, err := dlock.NewSemaphores(sem)
		if err != nil {
			return nil, exitFor(err)
		}
		return &locker{
			lock: func(ctx context.Context, key string, opts []dlock.Option) (holding, error) {
				h, err := nilIfFailed(s.Acquire(ctx, key, f.limit, 1, opts...))
				var lm *driver.LimitMismatchError
				if errors.As(err, &lm) {
					err = exitWith(ExitUsage, &textError{err: err, msg: fmt.Sprintf(
						"run --permits %d: semaphore %q has %d permits while any is out (its first user stored N); use --permits %d",
						f.limit, key, lm.Stored, lm.Stored)})
				}
				return h, err
			},
			close:  func() { closeBounded(s.Close) },
			report: permitReporter(sem),
		}, nil
	}
	client, err := dlock.New(st.Store, dlock.WithMeta(meta))
	if err != nil {
		return nil, exitFor(err)
	}
	return mutexLocker(client), nil
}

// mutexLocker is the locker of plain `run`: client's lock.
func mutexLocker(client *dlock.Client) *locker {
	return &locker{
		lock: func(ctx context.Context, key string, opts []dlock.Option) (holding, error) {
			return nilIfFailed(client.Lock(ctx, key, opts...))
		},
		close: func() {},
		report: func(ctx context.Context, w io.Writer, key, until string) func() {
			return reportWait(ctx, w, client.Store(), key, until)
		},
	}
}

// nilIfFailed turns a typed nil (a failed acquisition's) into a nil
// holding, so that callers can test h == nil.
func nilIfFailed[H holding](h H, err error) (holding, error) {
	if err != nil {
		return nil, err
	}
	return h, nil
}

// closeBounded closes an RWLocks or Semaphores, whose holding run has
// released already: it only stops their background work.
func closeBounded(close func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = close(ctx)
}

// what names the primitive of f's mode in run's messages: `lock "k"`,
// `read-write lock "k" (shared)`, `semaphore "k" (1 of 3 permits)`.
func (f *runFlags) what() string {
	switch mode := f.mode(); mode {
	case modeShared, modeExclusive:
		return fmt.Sprintf("read-write lock %q (%s)", f.key, mode)
	case modePermits:
		return fmt.Sprintf("semaphore %q (1 of %d permits)", f.key, f.limit)
	}
	return fmt.Sprintf("lock %q", f.key)
}

// takenWhy is the reason a read-write lock or a semaphore refused run's
// last attempt, as the store reported it, or "" if err holds none.
func takenWhy(err error) string {
	var rt *driver.RWTakenError
	var pt *driver.PermitsTakenError
	var why string
	var remaining time.Duration
	switch {
	case errors.As(err, &rt):
		remaining = rt.Remaining
		switch rt.Held {
		case driver.RWWrite:
			why = "held by a writer"
		case driver.RWRead:
			why = fmt.Sprintf("held by %d reader%s", rt.Readers, plural(rt.Readers))
		default:
			why = "free"
		}
		if rt.WriterWaiting && rt.Held != driver.RWWrite {
			why += ", a writer queued" // for --exclusive, maybe this very run's mark
		}
	case errors.As(err, &pt):
		remaining = pt.Remaining
		why = fmt.Sprintf("%d of %d permits out", pt.Used, pt.Limit)
	default:
		return ""
	}
	if remaining >= 0 {
		why += fmt.Sprintf(" (the earliest lease ends in %v unless renewed)", roundDur(remaining))
	}
	return why
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// noun names what run holds in the messages about a loss.
func (f *runFlags) noun() string {
	switch f.mode() {
	case modeShared:
		return "read holding"
	case modeExclusive:
		return "write holding"
	case modePermits:
		return "permit"
	}
	return "lock"
}

// shown is what -v's acquired and released lines name: the key alone for the
// mutex, as it always did.
func (f *runFlags) shown() string {
	if f.mode() == modeMutex {
		return fmt.Sprintf("%q", f.key)
	}
	return f.what()
}

// childEnv is what run adds to the command's environment: DLOCK_KEY,
// DLOCK_FENCE and, for the mutex, DLOCK_TOKEN (a read-write lock's holding
// and a permit have no token a user could use).
func childEnv(f *runFlags, h holding) []string {
	env := []string{"DLOCK_KEY=" + h.Key(), "DLOCK_FENCE=" + strconv.FormatUint(h.Fence(), 10)}
	if tok, ok := token(h); ok {
		env = append(env, "DLOCK_TOKEN="+tok)
	}
	return env
}
