package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"example.com/dlock"
)

func init() { subcommands = append(subcommands, newRunCmd) }

// runFlags are the options of `dlock run`.
type runFlags struct {
	store   storeFlags
	key     string
	lease   time.Duration // renewed lease (--lease)
	ttl     time.Duration // the removed --ttl: refused in RunE, naming --lease
	wait    time.Duration // meaningful only if waitSet
	waitSet bool
	grace   time.Duration
	verbose bool
	flockFlags
	familyFlags
	runJSON
}

// runLong is the help text of the subcommand, before the store flags'.
const runLong = `run acquires the lock KEY, runs COMMAND while renewing the lock, and releases
it when COMMAND exits. KEY is --key's value, or else the first argument after
the flags (as etcdctl lock takes its name; flags that follow KEY end with
--). Like flock(1), etcdctl lock and consul lock, but if the lock is lost
(the store lost the key, or it could not be renewed in time) the command's
process group gets SIGTERM, then SIGKILL after --grace, and run exits with 76.

The command runs in its own process group with these variables set:
  DLOCK_KEY    the lock key
  DLOCK_FENCE  the fencing token: larger than that of every earlier holder;
               pass it to the resource you protect so it can reject stale writers
  DLOCK_TOKEN  the owner token (a secret: whoever has it can release the lock)
SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 sent to run are forwarded to the
command's process group; the command decides what to do with them. Once the
command has exited after SIGINT, SIGTERM or SIGHUP (or was killed by a
signal), what is left of its group (a background process that ignores the
signal) gets SIGTERM, then SIGKILL after --grace, and run waits until the
group is gone before it releases the lock; after a loss, at once SIGKILL.
Processes the command leaves running when it exits on its own are left
alone, and run releases the lock: they run on unprotected.

The lease (--lease) is renewed every lease/3 while COMMAND runs; if dlock
itself dies, the lock is free again at most one lease later (on Linux the
command is killed with dlock, but not what it started in the background).
(--ttl, which meant this before, is refused: the library's WithTTL is a
fixed lease without renewal, so the old name misled.) If the store cannot be reached
when COMMAND ends, run waits for the release (and for closing the store) at
most a sixth of the lock's lifetime each, within [1s, 10s], warns that the
store frees the lock at most one lifetime after its last renewal, and exits
with COMMAND's status. The lifetime is the lease, or on stores that keep
locks in a session (etcd, ZooKeeper, SQL session mode) the session's TTL.

On the stores that keep holder metadata (Redis, etcd, ZooKeeper, SQL lease
tables),
run records "host=H pid=P cmd=C since=T" with its holding: this host, run's
own pid, COMMAND's name and the time run started; status and list show it.

While another owner holds the lock, run waits silently; with -v it says at
once whom it waits for (the holder as status shows it, its fence, and how
long its lease still runs, where the store can inspect keys), then only
when the lock changes hands.

An unreachable store ends run at once (69) unless --wait D (D > 0) is given: run
then keeps trying within D, saying so on stderr (at once, again when an
attempt fails after a second or more of failures, then at most every 10 s),
as it does whenever the store becomes unreachable while it waits.

--json prints one JSON object when run ends, whatever the outcome: key,
mode (mutex, shared, exclusive, permits), permits (with --permits),
outcome (exited, lost, not_acquired, interrupted, unavailable, refused,
usage, not_found, not_executable), exit_code, acquired, fence, waited_ms,
held_ms, released, command_status, error (docs/cli.md, "JSON output"). It
goes to stderr, as its last line, or to --json-fd N: never to stdout, which
is the command's.

--shared (-s) and --exclusive (-x) hold the read-write lock KEY instead, as
flock -s and -x: many --shared runs at once, or one --exclusive run alone; a
waiting --exclusive run keeps later --shared runs out. --permits N holds one
of the N permits of the semaphore KEY: at most N runs at once (N is stored
with KEY while permits are out; another N is a usage error). At most one of
the three. The lock, the read-write lock and the semaphore of one KEY are
separate: a plain run does not exclude --shared or --exclusive runs of the
same KEY. Renewal, loss (76), --wait, -n, -E, -v and --json work the same
(--json adds mode and permits); the command gets DLOCK_KEY and DLOCK_FENCE,
not DLOCK_TOKEN. They need a store that has them (today Redis: redis://,
rediss://, redis+cluster://, redis+sentinel://); elsewhere they exit 64.

flock(1) habits: -n fails at once if the lock is held (--wait 0); -w
takes --wait in seconds as well (-w 10 is --wait 10s); and -E N
(--conflict-exit-code) replaces 75 when the lock is held by another owner
(single try, or --wait elapsed).

Exit status: the command's own (128+N if killed by signal N); 64 bad usage
(including --shared/--exclusive/--permits on a store without them);
69 store unreachable; 75 lock not acquired (--wait elapsed, or interrupted
while waiting; -E N instead when the lock was held); 76 lock lost while the
command ran; 77 refused by the store (authentication failed, a permission
missing, or KEY holds a value that is not a lock: retrying cannot fix it);
126/127 command not executable / not found.

`

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] (--key KEY | KEY) [--] COMMAND [ARG...]",
		Short: "Run a command while holding a lock, renewing it and stopping the command if it is lost",
		Long:  runLong + storeFlagsHelp,
		Example: `  # Run a nightly job on at most one machine at a time; wait for the lock as long as it takes
  dlock run --store redis://10.0.0.5:6379 --key nightly-report -- ./report.sh --full

  # Give up after 10 s if another machine has it (exit status 75)
  dlock run --key deploy --wait 10s -- make deploy

  # Single try: skip this run if the job is already running elsewhere
  dlock run --key cron:cleanup --wait 0 -- ./cleanup.sh || [ $? -eq 75 ]

  # The same in flock(1)'s words, the key as etcdctl lock takes it: exit 0 when held elsewhere
  dlock run -n -E 0 cron:cleanup -- ./cleanup.sh

  # Record the outcome in a file of its own (fence, waited_ms, held_ms, outcome, exit_code)
  dlock run --json --json-fd 3 --key deploy -- make deploy 3>deploy.json

  # Many readers at once; a writer alone, ahead of readers that come after it
  dlock run --shared reports -- ./render.sh
  dlock run --exclusive reports -- ./rebuild.sh

  # At most 4 dumps at once across the fleet
  dlock run --permits 4 db-dumps -- ./dump.sh

  # Short lease (renewed every 2 s): a crash frees the lock within 6 s
  DLOCK_STORE=rediss://app:secret@redis.internal:6380 dlock run --key db-migrate --lease 6s -- ./migrate up`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exitWith(ExitUsage, errors.New("run: missing COMMAND (usage: dlock run --key KEY -- COMMAND [ARG...])"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if err := f.openJSON(cmd); err != nil {
				return err
			}
			defer func() { err = f.emitJSON(cmd, err) }()
			args, err = f.takeKey(cmd, args)
			if err != nil {
				return err
			}
			f.waitSet = cmd.Flags().Changed("wait")
			if len(args) == 0 {
				return exitWith(ExitUsage, errors.New("run: missing COMMAND (usage: dlock run --key KEY -- COMMAND [ARG...])"))
			}
			if err := f.applyFlock(cmd); err != nil {
				return err
			}
			if cmd.Flags().Changed("ttl") {
				return exitWith(ExitUsage, fmt.Errorf("run: --ttl is no longer accepted: it set a renewed lease, which is now --lease %v "+
					"(the library's WithTTL is a fixed lease without renewal; run always renews)", f.ttl))
			}
			if err := f.validateFamily(cmd); err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			return runLocked(cmd, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false) // everything after COMMAND belongs to COMMAND
	fl.StringVarP(&f.key, "key", "k", "", "lock key (required, unless given as the first argument)")
	fl.DurationVar(&f.lease, "lease", dlock.DefaultLease, "lease length; the lease is renewed every lease/3 while COMMAND runs (no effect, with a warning, where the store keeps locks in a session: etcd, zk, SQL mode=session)")
	// The old name is kept only to refuse it with a message naming --lease:
	// ignoring it, or reading it as the library's fixed TTL, would change
	// what old scripts do without a word.
	fl.DurationVar(&f.ttl, "ttl", 0, "removed: use --lease")
	_ = fl.MarkHidden("ttl")
	fl.VarP(waitValue{&f.wait}, "wait", "w", "give up waiting for the lock after this long (exit 75): a duration, or seconds as flock -w takes them; 0 = a single try (default: wait forever)")
	fl.DurationVar(&f.grace, "grace", 5*time.Second, "after the lock is lost, or once an interrupted command exited, time between SIGTERM and SIGKILL of its process group")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "report on stderr whom run waits for (at once, then when the lock changes hands), acquisition and release")
	f.registerFlock(cmd)
	f.registerFamily(cmd)
	f.registerJSON(cmd)
	f.store.register(cmd)
	return cmd
}

func (f *runFlags) validate() error {
	switch {
	case f.key == "":
		return exitWith(ExitUsage, errMissingKey)
	case f.waitSet && f.wait < 0:
		return exitWith(ExitUsage, fmt.Errorf("run: --wait %v is negative", f.wait))
	case f.grace < 0:
		return exitWith(ExitUsage, fmt.Errorf("run: --grace %v is negative", f.grace))
	}
	if err := dlock.ValidateKey(f.key); err != nil {
		return exitWith(ExitUsage, fmt.Errorf("run: --key: %w", err))
	}
	if f.lease < dlock.MinTTL || f.lease > dlock.MaxTTL {
		return exitWith(ExitUsage, fmt.Errorf("run: --lease %v is outside [%v, %v]", f.lease, dlock.MinTTL, dlock.MaxTTL))
	}
	return nil
}

// forwarded are the signals run passes on to the command instead of acting on
// them itself.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

func runLocked(cmd *cobra.Command, f *runFlags, args []string) error {
	// Catch signals from the start: while waiting they abort the wait, once
	// the command runs they are forwarded to it.
	started := time.Now()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	ctx := context.WithoutCancel(cmd.Context()) // signals are handled here, not by the root context
	deadline := time.Now().Add(f.wait)          // of the whole wait, connecting included
	rep := &unreachableReporter{w: cmd.ErrOrStderr(), key: f.key, until: f.waitHint()}
	st, err := f.openStore(ctx, cmd.ErrOrStderr(), rep, deadline, sigs)
	if err != nil {
		return err
	}
	life := lifeOf(st.Store.Model(), f.lease)
	if raw, _ := f.store.url(); cmd.Flags().Changed("lease") {
		if w := sessionLeaseWarning(raw, st.Store.Model(), f.lease); w != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), "dlock:", w)
		}
	}
	defer closeWithin(st, life.releaseBound())
	lk, err := f.lockerFor(st, runMeta(args[0], started))
	if err != nil {
		return err
	}
	defer lk.close()
	lease, err := acquire(ctx, lk, f, deadline, rep, sigs)
	f.out.acquired(lease)
	if err != nil {
		return err
	}
	if f.verbose {
		fmt.Fprintf(cmd.ErrOrStderr(), "dlock: acquired %s (fence %d) on %s\n", f.shown(), lease.Fence(), st.Desc)
	}
	res := supervise(cmd, f, lease, args, sigs)
	return finish(ctx, cmd, f, lease, life, res)
}

// acquire waits for the lock, giving up when --wait elapses (at deadline)
// or a forwarded signal arrives, and telling rep of every failed attempt.
func acquire(ctx context.Context, lk *locker, f *runFlags, deadline time.Time, rep *unreachableReporter, sigs <-chan os.Signal) (holding, error) {
	opts := []dlock.Option{dlock.WithAutoRenew(f.lease), dlock.WithOnRetry(rep.retry)}
	if f.waitSet {
		// --wait 0 stays a single try; a positive wait keeps what the
		// connection check left of it (at least a try).
		opts = append(opts, dlock.WithWait(min(f.wait, max(time.Until(deadline), time.Millisecond))))
	}
	wctx, cancel := context.WithCancelCause(ctx)
	got := make(chan os.Signal, 1)
	stopped := make(chan struct{})
	go func() {
		defer close(got)
		select {
		case s := <-sigs:
			got <- s
			cancel(fmt.Errorf("interrupted by %s while waiting", signalName(s)))
		case <-stopped:
		}
	}()
	stopReport := func() {}
	if f.verbose && (!f.waitSet || f.wait > 0) { // --wait 0 does not wait
		stopReport = lk.report(wctx, rep.w, f.key, f.waitHint())
	}
	lease, err := lk.lock(wctx, f.key, opts)
	stopReport()
	close(stopped)
	s := <-got // the watcher has exited; a signal it took is in s
	cancel(nil)
	if err == nil && s != nil {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_ = lease.Release(rctx)
		rcancel()
		err = context.Cause(wctx)
	}
	switch {
	case err == nil:
		return lease, nil
	case s != nil:
		f.out.set(outcomeInterrupted)
		return nil, exitWith(ExitNotAcquired, fmt.Errorf("%s not acquired: %w", f.what(), context.Cause(wctx)))
	case errors.Is(err, dlock.ErrRefused):
		return nil, exitWith(ExitRefused, fmt.Errorf("%s not acquired: the store refused, and retrying cannot fix it: %w", f.what(), refusal(err, f.key)))
	case errors.Is(err, dlock.ErrNotAcquired) && !errors.Is(err, dlock.ErrUnavailable):
		f.out.set(outcomeNotAcquired)
		return nil, exitWith(f.conflictExit(), notAcquiredError(f, err))
	}
	return nil, exitFor(err)
}
