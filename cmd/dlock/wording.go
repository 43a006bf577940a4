package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"syscall"
)

// textError shows msg, the CLI's wording of err, and still matches
// everything err matches.
type textError struct {
	msg string
	err error
}

func (e *textError) Error() string { return e.msg }
func (e *textError) Unwrap() error { return e.err }

// signalName is a signal as the shell names it ("SIGINT"), not as Go's
// String does ("interrupt").
func signalName(s os.Signal) string {
	names := map[os.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2", syscall.SIGQUIT: "SIGQUIT"}
	if n, ok := names[s]; ok {
		return n
	}
	return s.String()
}

// refusal is a store's refusal as the CLI shows it: the store's reason
// alone, without the sentinels' texts ("lock not acquired: ", "refused by
// the store: "), without `lock "KEY": ` (the CLI's sentence names the key,
// or it is the CLI's own probe key), and without a server reply that only
// repeats the reason (Redis' "NOTALOCK the key holds a value that is not a
// dlock lock" after the store's own longer text). An SQL store's missing
// schema gets the CLI's fix instead of the library's hint for Go callers.
// It matches what err matches.
func refusal(err error, key string) error {
	msg := stripLibPrefix(strings.ReplaceAll(err.Error(), "\n", "; "))
	for _, s := range []string{"lock not acquired: ", "refused by the store: ", fmt.Sprintf("lock %q: ", key)} {
		msg = strings.ReplaceAll(msg, s, "")
	}
	if missingSchema(err) {
		return &textError{msg: cliHints(msg) + "; apply the schema: " + schemaFix, err: err}
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		code, rest, ok := strings.Cut(msg[i+2:], " ")
		if ok && code == strings.ToUpper(code) && strings.Contains(msg[:i], rest) {
			msg = msg[:i]
		}
	}
	return &textError{msg: msg, err: err}
}

// unreachable is the one form in which every subcommand reports a store it
// cannot reach: "cannot reach DESC: reason", DESC naming the store and its
// address (from the URL, without user information), err's text without the
// sentinel's "store unavailable: ". It matches what err matches.
func unreachable(desc string, err error) error {
	msg := strings.ReplaceAll(stripLibPrefix(strings.ReplaceAll(err.Error(), "\n", "; ")), "store unavailable: ", "")
	return &textError{msg: fmt.Sprintf("cannot reach %s: %s", desc, msg), err: err}
}

// addressOf describes the store of raw by scheme and address, for a
// message about a store that could not be opened (no Describe yet): no
// user information, no query.
func addressOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return schemeOf(raw) + " store"
	}
	return u.Scheme + " " + u.Host
}

// checkGlob rejects a pattern that globMatch would read in a way the user
// did not mean: a class without its closing ']', or a lone backslash at the
// end. It does no I/O.
func checkGlob(pattern string) error {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			if i+1 == len(pattern) {
				return errors.New("ends in a lone backslash (escape it as \\\\)")
			}
			i++
		case '[':
			_, rest, closed := matchClass(pattern[i+1:], 0)
			if !closed {
				return fmt.Errorf("the class at byte %d has no closing ']' (a literal [ is \\[)", i)
			}
			i = len(pattern) - len(rest) - 1
		}
	}
	return nil
}
