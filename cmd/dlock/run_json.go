package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"example.com/dlock"
)

// runJSON is the --json of `dlock run`: one object describing the outcome,
// on one line, written when run ends, on stderr or --json-fd. Not on stdout:
// that is the command's, and a pipeline reading it must get it unchanged.
type runJSON struct {
	json   bool
	jsonFD int
	w      io.Writer   // where the object goes; nil without --json
	out    *runOutcome // filled as run goes; never nil once RunE started
}

// Outcomes of runOutcome.Outcome.
const (
	outcomeExited        = "exited"         // the command ran and exited: exit_code is its status
	outcomeLost          = "lost"           // the lock was lost while the command ran (76)
	outcomeNotAcquired   = "not_acquired"   // held by another owner: single try, or --wait elapsed (75, or -E)
	outcomeInterrupted   = "interrupted"    // a signal ended the wait (75)
	outcomeUnavailable   = "unavailable"    // the store could not be reached (69)
	outcomeRefused       = "refused"        // the store refused (77)
	outcomeUsage         = "usage"          // bad usage found after the flags parsed (64)
	outcomeNotFound      = "not_found"      // the command was not found (127)
	outcomeNotExecutable = "not_executable" // the command could not be executed (126)
	outcomeError         = "error"          // anything else
)

// runOutcome is the object `dlock run --json` prints (docs/cli.md, "JSON
// output").
type runOutcome struct {
	Key           string `json:"key"`
	Mode          string `json:"mode"`              // mutex, shared, exclusive or permits
	Permits       int    `json:"permits,omitempty"` // --permits N: the semaphore's N
	Outcome       string `json:"outcome"`
	ExitCode      int    `json:"exit_code"` // run's own exit status
	Acquired      bool   `json:"acquired"`
	Fence         uint64 `json:"fence,omitempty"`          // when acquired
	WaitedMs      int64  `json:"waited_ms"`                // start to acquired, or to giving up
	HeldMs        *int64 `json:"held_ms,omitempty"`        // when acquired: acquired to released
	Released      *bool  `json:"released,omitempty"`       // when acquired: the release succeeded
	CommandStatus *int   `json:"command_status,omitempty"` // when the command ran: its status (128+N if killed by signal N)
	Error         string `json:"error,omitempty"`          // the message run printed, if any

	start, got time.Time
	lost       bool
}

func (f *runFlags) registerJSON(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "when run ends, print one JSON object describing the outcome (key, fence, waited, held, exit reason) on --json-fd")
	fl.IntVar(&f.jsonFD, "json-fd", 2, "file descriptor for --json (default stderr; e.g. 3 with 3>outcome.json)")
}

// openJSON starts the outcome's clock and, with --json, checks --json-fd: a
// descriptor that is not open is a usage error (nothing could be printed).
// A descriptor other than 1 and 2 is closed in the command (close-on-exec).
func (f *runFlags) openJSON(cmd *cobra.Command) error {
	f.out = &runOutcome{start: time.Now()}
	switch {
	case !f.json:
		return nil
	case f.jsonFD == 1:
		f.w = cmd.OutOrStdout()
	case f.jsonFD == 2:
		f.w = cmd.ErrOrStderr()
	case f.jsonFD < 1:
		return exitWith(ExitUsage, fmt.Errorf("run: --json-fd %d: want 1 (stdout), 2 (stderr) or an open descriptor above", f.jsonFD))
	default:
		var st syscall.Stat_t
		if err := syscall.Fstat(f.jsonFD, &st); err != nil {
			return exitWith(ExitUsage, fmt.Errorf("run: --json-fd %d is not open (%w): redirect it, e.g. %d>outcome.json", f.jsonFD, err, f.jsonFD))
		}
		syscall.CloseOnExec(f.jsonFD)
		f.w = fdWriter(f.jsonFD)
	}
	return nil
}

// set records the outcome of a step that knows it.
func (o *runOutcome) set(outcome string) {
	if o != nil {
		o.Outcome = outcome
	}
}

// acquired records the end of the wait, and the lease if it was granted.
func (o *runOutcome) acquired(l holding) {
	if o == nil {
		return
	}
	o.got = time.Now()
	o.WaitedMs = o.got.Sub(o.start).Milliseconds()
	if l != nil {
		o.Acquired, o.Fence = true, l.Fence()
	}
}

// ended records how the command ended and the release's result.
func (o *runOutcome) ended(res childResult, rerr error) {
	if o == nil {
		return
	}
	held, released := time.Since(o.got).Milliseconds(), rerr == nil
	o.HeldMs, o.Released = &held, &released
	o.lost = res.lost != nil || errors.Is(rerr, dlock.ErrLost)
	switch {
	case res.startEr == nil:
		o.CommandStatus = &res.code
		o.Outcome = outcomeExited
	case errors.Is(res.startEr, exec.ErrNotFound) || errors.Is(res.startEr, os.ErrNotExist):
		o.Outcome = outcomeNotFound
	default:
		o.Outcome = outcomeNotExecutable
	}
	if o.lost {
		o.Outcome = outcomeLost
	}
}

// emitJSON completes and prints the outcome of a run that ended with err,
// with --json. An error's message is printed here, before the object, so
// that the object is the last line run writes; the returned error then
// carries the exit code alone. Without --json it returns err unchanged.
func (f *runFlags) emitJSON(cmd *cobra.Command, err error) error {
	if f.w == nil {
		return err
	}
	o := f.out
	o.Key, o.Mode, o.Permits = f.key, f.mode(), f.limit
	if o.got.IsZero() { // it ended before the wait did (connecting, or bad usage)
		o.WaitedMs = time.Since(o.start).Milliseconds()
	}
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		o.ExitCode = ee.code
	default:
		o.ExitCode = ExitUsage
	}
	if err != nil && (ee == nil || ee.err != nil) {
		o.Error = unprefixed(err)
		fmt.Fprintln(cmd.ErrOrStderr(), "dlock:", o.Error)
		err = &exitError{code: o.ExitCode}
	}
	if o.Outcome == "" {
		o.Outcome = outcomeOf(o.ExitCode)
	}
	b, _ := json.Marshal(o)
	_, _ = f.w.Write(append(b, '\n'))
	return err
}

// outcomeOf names an outcome that no step recorded, from run's exit code.
// (A 75 that acquire did not record is a wait for the store that a signal
// ended.)
func outcomeOf(code int) string {
	switch code {
	case 0:
		return outcomeExited
	case ExitUsage:
		return outcomeUsage
	case ExitUnavailable:
		return outcomeUnavailable
	case ExitRefused:
		return outcomeRefused
	case ExitNotAcquired:
		return outcomeInterrupted
	}
	return outcomeError
}

// fdWriter writes to a descriptor run does not own (no os.File, whose
// finalizer would close it).
type fdWriter int

func (fd fdWriter) Write(p []byte) (int, error) { return syscall.Write(int(fd), p) }
