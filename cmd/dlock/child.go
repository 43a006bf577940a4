package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// childResult is how the command under the lock ended.
type childResult struct {
	code    int   // exit status to report for the command
	lost    error // non-nil if the lock was lost while it ran
	startEr error // non-nil if it could not be started
}

// supervise starts the command in its own process group and waits for it,
// forwarding signals, and stopping the group (SIGTERM, then SIGKILL after
// --grace) if the lease ends before the command does.
func supervise(cmd *cobra.Command, f *runFlags, lease holding, args []string, sigs <-chan os.Signal) childResult {
	c := exec.Command(args[0], args[1:]...)
	c.Stdin, c.Stdout, c.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	c.Env = append(os.Environ(), childEnv(f, lease)...)
	attr, restoreTTY := childSysProcAttr(c.Stdin)
	c.SysProcAttr = attr
	defer restoreTTY()
	// Pdeathsig follows the thread that started the child: keep it alive.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.Start(); err != nil {
		return childResult{startEr: err}
	}
	pgid := c.Process.Pid
	waited := make(chan struct{})
	go func() {
		_ = c.Wait() // the status is read from c.ProcessState below
		close(waited)
	}()
	var (
		res         childResult
		leaseEnd    = lease.Done()
		kill        <-chan time.Time
		interrupted bool // a signal that stops commands was forwarded
	)
	for {
		select {
		case <-waited:
			res.code = exitStatus(c.ProcessState)
			endGroup(cmd, f, pgid, res.lost != nil, interrupted || signaled(c.ProcessState))
			return res
		case s := <-sigs:
			interrupted = interrupted || stopsCommand(s)
			_ = syscall.Kill(-pgid, s.(syscall.Signal))
		case <-leaseEnd:
			leaseEnd = nil
			res.lost = plain(lease.Err())
			fmt.Fprintf(cmd.ErrOrStderr(), "dlock: %v: stopping the command (SIGTERM, SIGKILL after %v)\n", res.lost, f.grace)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			t := time.NewTimer(f.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// endGroup deals with what the command left in its process group when it
// exited, before the lock is released. After a loss it is killed at once
// (it is no longer protected); after an interruption (a forwarded SIGINT,
// SIGTERM or SIGHUP, or the command killed by a signal) it gets SIGTERM, then
// SIGKILL after --grace, so that no process of the interrupted command
// outlives the lock; run waits until the group is gone. After a command that
// exited on its own, processes it left running are left alone.
func endGroup(cmd *cobra.Command, f *runFlags, pgid int, lost, interrupted bool) {
	var gone bool
	switch {
	case lost:
		gone = stopGroup(pgid, syscall.SIGKILL, 0)
	case interrupted:
		gone = stopGroup(pgid, syscall.SIGTERM, f.grace)
	default:
		return
	}
	if !gone {
		fmt.Fprintf(cmd.ErrOrStderr(), "dlock: warning: processes of the command's group %d outlived SIGKILL by %v\n", pgid, groupKillBound)
	}
}

// stopsCommand reports whether s, forwarded to the command, asks it to stop.
func stopsCommand(s os.Signal) bool {
	return s == syscall.SIGINT || s == syscall.SIGTERM || s == syscall.SIGHUP
}

// signaled reports whether the process was killed by a signal.
func signaled(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// exitStatus is the shell's view of how a process ended: its exit code, or
// 128+N if signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// finish releases the lock after the command ended and turns the outcome into
// run's exit status.
func finish(ctx context.Context, cmd *cobra.Command, f *runFlags, lease holding, life storeLife, res childResult) error {
	rctx, cancel := context.WithTimeout(ctx, life.releaseBound())
	defer cancel()
	rerr := lease.Release(rctx)
	f.out.ended(res, rerr)
	switch {
	case res.startEr != nil:
		code := 126
		if errors.Is(res.startEr, exec.ErrNotFound) || errors.Is(res.startEr, os.ErrNotExist) {
			code = 127
		}
		return exitWith(code, fmt.Errorf("run: %w", res.startEr))
	case res.lost != nil:
		return exitWith(ExitLost, fmt.Errorf("run: the command was stopped because the %s was lost: %w", f.noun(), res.lost))
	case errors.Is(rerr, dlock.ErrLost):
		// The command finished, but the lock was gone before it did: its
		// work may not have been protected.
		return exitWith(ExitLost, fmt.Errorf("run: the command finished (status %d) but the %s was lost before: %w", res.code, f.noun(), plain(rerr)))
	case rerr != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "dlock: warning: release of %q failed; the store frees it at most %v after its last renewal (%s): %v\n",
			f.key, life.ttl, life.what(), strings.TrimSuffix(unprefixed(rerr), " (the release is retried in the background)")) // run exits: nothing retries
	case f.verbose:
		fmt.Fprintf(cmd.ErrOrStderr(), "dlock: released %s\n", f.shown())
	}
	if res.code != 0 {
		return &exitError{code: res.code} // the command's status, with no message of ours
	}
	return nil
}

// storeLife is how long the store keeps a lock it can no longer be told to
// release: the lease, or on a session store the session's TTL.
type storeLife struct {
	ttl     time.Duration
	session bool
}

// lifeOf is the lifetime m gives a lock of the requested lease.
func lifeOf(m driver.Model, lease time.Duration) storeLife {
	return storeLife{ttl: m.TTLFor(lease), session: m.Session && m.SessionTTL > 0}
}

// what names the figure for messages.
func (l storeLife) what() string {
	if l.session {
		return "the session TTL"
	}
	return "the lease"
}

// releaseBound bounds the release after the command ended and the store's
// Close: a sixth of the lock's lifetime, within [1 s, 10 s]. A store that
// cannot be reached frees the lock within its lifetime anyway, so waiting
// longer only delays run's exit.
func (l storeLife) releaseBound() time.Duration {
	return min(max(l.ttl/6, time.Second), 10*time.Second)
}

// closeWithin closes st, waiting at most d: a store that cannot be reached
// may spend its own, longer, timeout in Close (etcd revokes its session),
// and run is about to exit.
func closeWithin(st *openedStore, d time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.Close()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
