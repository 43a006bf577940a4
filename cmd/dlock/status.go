package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"example.com/dlock"
	"example.com/dlock/driver"
)

func init() { subcommands = append(subcommands, newStatusCmd) }

// lockStatus is the output of `dlock status` and one row of `dlock list`;
// its JSON is documented in docs/cli.md ("JSON output").
type lockStatus struct {
	Key        string `json:"key"`
	Held       bool   `json:"held"`
	Holder     string `json:"holder,omitempty"`      // the token's first characters (abbrev), never the whole; "" when unknown
	HolderKind string `json:"holder_kind,omitempty"` // when held: holderDlock or holderForeign
	Holds      int    `json:"holds"`
	TTLms      *int64 `json:"ttl_ms,omitempty"` // when held; -1 when the store does not know
	Fence      uint64 `json:"fence"`
	Waiters    *int   `json:"waiters,omitempty"` // nil when the store cannot tell
	Meta       string `json:"meta,omitempty"`    // the holder's metadata (driver.Info.Meta), when held and kept

	// The read-write lock and the semaphore of the same name (status only;
	// nil when the store cannot inspect them): see status_family.go.
	RW  *rwStatus  `json:"rwlock,omitempty"`
	Sem *semStatus `json:"semaphore,omitempty"`
}

// Holder kinds of lockStatus.HolderKind.
const (
	holderDlock   = "dlock"   // a dlock client (its token may be unknown: etcd keeps a digest)
	holderForeign = "foreign" // not a dlock client, such as etcdctl lock
)

// ttl is the remaining lease in milliseconds: -1 when unknown or not held.
func (s lockStatus) ttl() int64 {
	if s.TTLms == nil {
		return -1
	}
	return *s.TTLms
}

// holderText is the holder as status and list print it.
func (s lockStatus) holderText() string {
	switch {
	case s.Holder != "":
		return s.Holder + "…" // a prefix, never the whole token
	case s.HolderKind == holderForeign:
		return "(not a dlock client)"
	}
	return "(a dlock client, token unknown)"
}

func newStatusCmd() *cobra.Command {
	var (
		sf     storeFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status KEY",
		Short: "Show who holds a lock: holder, hold count, remaining TTL, fence, waiters",
		Long: `status reads the state of the lock KEY without changing it: whether it is
held, by whom (the first characters of the owner token; the whole token is a
secret and is never shown; "not a dlock client" for a holder such as etcdctl
lock, and on etcd, which keeps only a digest of tokens, a dlock holder in
another process is shown without its token), the holder's metadata where the
store keeps it (dlock run records host, pid, program and start time; a
Curator holder on ZooKeeper shows its node data, the client's address),
the hold count (re-entrant holds), the remaining
time to live, the last fencing token issued for KEY, and how many clients
(processes) wait for it, when the store can tell.

Where the store has them (today Redis), status also shows the read-write lock
and the semaphore of the same name (separate from the lock): the readers or
the writer, whether a writer is queued, the permits used of N, each holding
with its holder, fence and remaining lease; the text only while in use.

--json prints one object: key, held, holder (the token's first characters,
without "…"), holder_kind (dlock or foreign), holds, ttl_ms, fence, waiters,
rwlock (mode, readers, writer, writer_waiting, writer_waiting_ms) and
semaphore (limit, used, holders), the last two where the store can inspect
them; meta (when the store keeps the holder's metadata); a free key has no
holder, holder_kind, ttl_ms or meta (docs/cli.md, "JSON output").

It works on every store that can inspect keys (driver.Inspector); the waiter
count needs driver.WaiterCounter and is "unknown" without it.

Exit status: 0 whether or not the lock is held; 64 bad usage, or a store
that cannot inspect keys; 69 store unreachable, or it cannot inspect keys
right now; 77 refused by the store: the key holds a value that is not a lock
(nobody can acquire it until it is removed: dlock release --force KEY), or a
permission is missing.

` + storeFlagsHelp,
		Example: `  dlock status nightly-report
  dlock status --store redis://10.0.0.5:6379 deploy
  dlock status --json deploy | jq .ttl_ms
  dlock status --redis-cluster 'redis://10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000' orders:42`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exitWith(ExitUsage, errors.New("status: need exactly one KEY"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := dlock.ValidateKey(args[0]); err != nil {
				return exitWith(ExitUsage, plain(err))
			}
			st, err := sf.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := inspect(cmd.Context(), st.Store, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			printStatus(cmd.OutOrStdout(), s)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	sf.register(cmd)
	return cmd
}

// inspect reads one key's state through the store's Inspector capability,
// and its waiter count through WaiterCounter when the store has one. A store
// without an Inspector gives ExitUsage, one that cannot inspect right now
// (errors.ErrUnsupported) ExitUnavailable, and one that refuses
// (dlock.ErrRefused) ExitRefused, naming the key.
func inspect(ctx context.Context, store driver.Mutex, key string) (lockStatus, error) {
	in, ok := driver.As[driver.Inspector](store)
	if !ok {
		return lockStatus{}, exitWith(ExitUsage, errors.New("this store cannot inspect locks (it has no driver.Inspector)"))
	}
	info, err := in.Inspect(ctx, key)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return lockStatus{}, exitWith(ExitUnavailable, fmt.Errorf("key %q: the store cannot inspect it now: %w", key, plain(err)))
	case errors.Is(err, dlock.ErrRefused):
		// Typically a value at the lock's key that is not a lock: `run`
		// reports such a key as held by another owner, so "held: no"
		// would be a lie.
		return lockStatus{}, exitWith(ExitRefused, fmt.Errorf("key %q: the store refused to read it as a lock: %w", key, refusal(err, key)))
	case err != nil:
		return lockStatus{}, exitFor(err)
	}
	s := lockStatusOf(key, info)
	if wc, ok := driver.As[driver.WaiterCounter](store); ok {
		if n, err := wc.Waiters(ctx, key); err == nil {
			s.Waiters = &n
		}
	}
	return s, inspectFamily(ctx, store, &s)
}

// lockStatusOf is the displayed state of a key: for a held key the token
// abbreviated and the remaining TTL (-1 when the store does not know it);
// for a free key neither (a Redis tombstone's retention is no lease).
func lockStatusOf(key string, info driver.Info) lockStatus {
	s := lockStatus{Key: key, Held: info.Held, Holds: info.Holds, Fence: info.Fence}
	if !info.Held {
		return s
	}
	ttl := max(info.Remaining.Milliseconds(), 0)
	if info.Remaining < 0 {
		ttl = -1 // unknown
	}
	s.TTLms, s.Holder, s.HolderKind = &ttl, abbrev(info.Token), holderDlock
	s.Meta = info.Meta
	if info.Token == "" && info.Foreign {
		s.HolderKind = holderForeign
	}
	return s
}

func printStatus(w io.Writer, s lockStatus) {
	fmt.Fprintf(w, "key:      %s\n", s.Key)
	if !s.Held {
		fmt.Fprintf(w, "held:     no\n")
	} else {
		fmt.Fprintf(w, "held:     yes\n")
		fmt.Fprintf(w, "holder:   %s\n", s.holderText())
		if s.Meta != "" {
			fmt.Fprintf(w, "meta:     %s\n", s.Meta)
		}
		fmt.Fprintf(w, "holds:    %d\n", s.Holds)
		if s.ttl() >= 0 {
			fmt.Fprintf(w, "ttl:      %v (remaining lease)\n", roundDur(msDur(s.ttl())))
		} else {
			fmt.Fprintf(w, "ttl:      unknown\n")
		}
	}
	fmt.Fprintf(w, "fence:    %d\n", s.Fence)
	if s.Waiters != nil {
		fmt.Fprintf(w, "waiters:  %d\n", *s.Waiters)
	} else {
		fmt.Fprintf(w, "waiters:  unknown\n")
	}
	printFamily(w, s)
}
