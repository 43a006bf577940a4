// Command dlock is the command-line face of the dlock library: run a command
// under a distributed lock, inspect locks, check a store for lock safety, and
// run the seed articles' inventory demo. The store is chosen by URL (--store
// or DLOCK_STORE), opened with driver.Open by the store package that
// registered the URL's scheme.
//
// Exit codes (see exitError):
//
//	0      success (for `dlock run`, the child's own exit code otherwise)
//	64     bad usage: unknown flag, missing argument, invalid value, bad
//	       store URL; status/list/top on a store that cannot inspect/list keys;
//	       schema on a store without a schema
//	69     store unreachable, or it cannot inspect/list keys right now
//	75     lock not acquired within --wait (or interrupted while waiting)
//	76     lock lost while the child ran (the child was stopped); bench: the
//	       protected counter disagrees with the critical sections counted
//	77     refused by the store: authentication failed, a permission (ACL) is
//	       missing, or the key holds a value that is not a lock; retrying
//	       cannot fix it
//	78     `dlock doctor` found an unsafe setting, or its probe failed
//	126    `dlock run`: the command could not be executed
//	127    `dlock run`: the command was not found
//
// docs/cli.md in the repository describes every subcommand.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes, chosen from sysexits(3) so that scripts can tell them from a
// child's own codes.
const (
	ExitUsage       = 64
	ExitUnavailable = 69
	ExitNotAcquired = 75
	ExitLost        = 76
	ExitRefused     = 77 // EX_NOPERM
	ExitUnsafe      = 78
)

// exitError carries an exit code out of a subcommand.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

// subcommands registers every subcommand; files add theirs in init.
var subcommands []func() *cobra.Command

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "dlock",
		Short: "Distributed locks: run commands under a lock, inspect locks, run the inventory demo",
		Long: `dlock runs commands under a distributed lock, renewing it while they run and
stopping them if it is lost; shows who holds a lock; checks a store for lock
safety; and runs the inventory demo from the articles that inspired it.

The store is chosen by URL with --store or DLOCK_STORE: redis://, rediss://,
redis+cluster://, redis+sentinel://, redlock://, etcd://, etcds://, zk://, postgres://
(postgresql://) and mysql:// (see any subcommand's --help).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	// --version prints what `dlock version` prints.
	root.SetVersionTemplate("dlock {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitWith(ExitUsage, err) })
	for _, mk := range subcommands {
		root.AddCommand(mk())
	}
	return root
}

// run executes the CLI and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "dlock:", unprefixed(ee.err))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "dlock:", unprefixed(err))
	return ExitUsage // cobra's own errors: unknown command, bad arguments
}

// unprefixed is err's text without the "dlock: " that every wrapped library
// error brings along (the CLI prints its own prefix once), on one line
// (errors.Join puts its parts on lines of their own); see stripLibPrefix.
func unprefixed(err error) string {
	return stripLibPrefix(strings.ReplaceAll(err.Error(), "\n", "; "))
}

// stripLibPrefix removes the library's "dlock: " prefixes from s. Only a
// prefix that starts s or follows a space, "(" or a quote is removed: the
// "redlock: " of the Redlock store's errors, and a description that ends in
// a name such as a database "…/dlock: ", keep their text.
//
// Why the CLI needs it (issue 24 looked for a fix at the source): the
// prefixes are the texts of the driver's sentinels ("dlock: invalid
// argument", "dlock: refused by the store", …), which every store wraps
// ("%w: pgstore: …") and which library users see as the package's name, as
// with "io: …" or "sql: …". The CLI, also named dlock, prints its own
// "dlock: " and embeds library errors in its sentences ("cannot reach %s:
// %w", "schema --apply on %s: %w", a dozen sites), so each would show the
// prefix twice; and some library texts already hold it mid-line
// (driver.NotHeld's "dlock: lock not held: dlock: lease expired", a store's
// "mysqlstore: row lock "k": dlock: lock not acquired: …"). Only sentinel
// texts without the prefix would avoid this at the source: a change of
// every error text the library's users see, for the CLI's sake.
func stripLibPrefix(s string) string {
	const prefix = "dlock: "
	var b strings.Builder
	for {
		i := strings.Index(s, prefix)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		if i > 0 && !strings.ContainsRune(" (\"'\t", rune(s[i-1])) {
			b.WriteString(prefix) // part of a longer word or name, such as "redlock: "
		}
		s = s[i+len(prefix):]
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	becomeSubreaper() // run reaps what its command leaves in its group (endGroup)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
