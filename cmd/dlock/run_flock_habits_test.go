package main

import (
	"strings"
	"testing"
)

// flock(1)'s -n and -E, and etcdctl lock's positional key, next to today's
// flags, on the in-process memstore (mem://full).
func TestRunFlockHabits(t *testing.T) {
	holdMem(t, "habits:busy")
	for _, c := range []struct {
		name string
		args []string
		code int
		out  string // the command's stdout, when it runs
		err  string // in stderr
	}{
		// -n: a single try, as --wait 0.
		{"-n on a held key", []string{"-n", "--key", "habits:busy", "--", "true"}, ExitNotAcquired, "", "(--wait 0: a single try)"},
		{"--nonblock on a free key", []string{"--nonblock", "--key", "habits:free", "--", "echo", "ran"}, 0, "ran\n", ""},
		{"-n with --wait 0", []string{"-n", "--wait", "0", "--key", "habits:busy", "--", "true"}, ExitNotAcquired, "", "not acquired"},
		{"-n against --wait 5s", []string{"-n", "--wait", "5s", "--key", "habits:busy", "--", "true"}, ExitUsage, "", "contradicts --wait 5s"},
		// -w: --wait, also in seconds as flock -w takes it.
		{"-w seconds", []string{"-w", "0.05", "--key", "habits:busy", "--", "true"}, ExitNotAcquired, "", "within --wait 50ms"},
		{"-w duration", []string{"-w", "60ms", "--key", "habits:busy", "--", "true"}, ExitNotAcquired, "", "within --wait 60ms"},
		{"--wait seconds", []string{"--wait", "0", "--key", "habits:busy", "--", "true"}, ExitNotAcquired, "", "(--wait 0: a single try)"},
		{"--wait bad", []string{"--wait", "soon", "--key", "habits:busy", "--", "true"}, ExitUsage, "", "want a duration (10s, 1m30s) or a number of seconds"},
		{"-w negative", []string{"-w", "-1", "--key", "habits:busy", "--", "true"}, ExitUsage, "", "--wait -1s is negative"},
		// -E: the status when the lock is held; other outcomes keep theirs.
		{"-E 3 on a held key", []string{"-n", "-E", "3", "--key", "habits:busy", "--", "true"}, 3, "", "not acquired"},
		{"-E 0 on a held key", []string{"-n", "-E", "0", "--key", "habits:busy", "--", "true"}, 0, "", "not acquired"},
		{"--conflict-exit-code after --wait", []string{"--wait", "50ms", "--conflict-exit-code", "9", "--key", "habits:busy", "--", "true"}, 9, "", "within --wait 50ms"},
		{"-E leaves the command's status", []string{"-E", "3", "--key", "habits:free", "--", "sh", "-c", "exit 5"}, 5, "", ""},
		{"-E 256", []string{"-E", "256", "--key", "habits:free", "--", "true"}, ExitUsage, "", "outside 0-255"},
		{"-E -1", []string{"-E", "-1", "--key", "habits:free", "--", "true"}, ExitUsage, "", "outside 0-255"},
		// The key as the first argument, when --key is not given.
		{"positional key with --", []string{"habits:pos", "--", "sh", "-c", `echo "$DLOCK_KEY"`}, 0, "habits:pos\n", ""},
		{"positional key without --", []string{"habits:pos", "sh", "-c", `echo "$DLOCK_KEY"`}, 0, "habits:pos\n", ""},
		{"positional key, held", []string{"-n", "habits:busy", "--", "true"}, ExitNotAcquired, "", `lock "habits:busy" not acquired`},
		{"flags after a positional key", []string{"habits:busy", "-n", "-E", "4", "--", "true"}, 4, "", "not acquired"},
		{"flags after a positional key without --", []string{"habits:busy", "-n", "true"}, ExitUsage, "", "put run's flags before KEY"},
		{"a bad flag after a positional key", []string{"habits:busy", "--bogus", "--", "true"}, ExitUsage, "", "unknown flag: --bogus"},
		{"positional key, no command", []string{"habits:pos"}, ExitUsage, "", "missing COMMAND"},
		{"no key at all", []string{"--", "true"}, ExitUsage, "", "KEY is required"},
		// Today's forms are unchanged: with --key every argument is the command's.
		{"--key and --", []string{"--key", "habits:old", "--", "echo", "old"}, 0, "old\n", ""},
		{"--key without --", []string{"--key", "habits:old", "echo", "old", "-n"}, 0, "old -n\n", ""},
		{"-k and a command that looks like a key", []string{"-k", "habits:old", "echo", "--", "x"}, 0, "-- x\n", ""},
		{"--wait 0 on a held key", []string{"--wait", "0", "--key", "habits:busy", "--", "true"}, ExitNotAcquired, "", "not acquired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--store", "mem://full"}, c.args...)
			code, out, stderr := runCLI(t, args...)
			if code != c.code || !strings.Contains(stderr, c.err) || c.out != "" && out != c.out {
				t.Fatalf("dlock %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
					args, code, out, stderr, c.code, c.out, c.err)
			}
		})
	}
}

// The help shows the habits it accepts.
func TestRunHelpNamesFlockHabits(t *testing.T) {
	_, out, _ := runCLI(t, "run", "--help")
	for _, want := range []string{"-n, --nonblock", "-E, --conflict-exit-code", "-w, --wait", "(--key KEY | KEY)", "dlock run -n -E 0 cron:cleanup"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
}
