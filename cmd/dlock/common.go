package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// go-redis logs every failed dial on its own; the CLI reports the error once,
// in its own words, so the library's log is silenced.
func init() { redis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// plainError shows an error without the library's repeated "dlock: "
// prefixes (the CLI adds its own) while keeping it matchable with errors.Is.
type plainError struct{ err error }

func (e plainError) Error() string { return stripLibPrefix(e.err.Error()) }
func (e plainError) Unwrap() error { return e.err }

// plain wraps err in a plainError.
func plain(err error) error {
	if err == nil {
		return nil
	}
	return plainError{err}
}

// connectTimeout bounds the reachability check every subcommand makes before
// its first real call, so an unreachable store fails fast with ExitUnavailable
// instead of waiting in the lock's retry loop.
const connectTimeout = 5 * time.Second

// connectAttempts bounds the probes connect makes (within connectTimeout).
const connectAttempts = 3

// connectProbeKey is the key connect inspects to see that the store answers.
const connectProbeKey = "dlock-connect-probe"

// connect opens the selected store and checks that it answers: by
// inspecting a probe key when the store can inspect (a read; nothing is
// written; a probe that times out is tried up to connectAttempts times
// within connectTimeout), else not at all (the first real call then
// reports). Bad flags
// return ExitUsage, a store that rejects the user (WRONGPASS, NOAUTH,
// NOPERM: driver.ErrRefused) ExitRefused, an unreachable store
// ExitUnavailable; nothing is left open on failure.
func (f *storeFlags) connect(ctx context.Context) (*openedStore, error) {
	st, err := f.openWithin(ctx, connectTimeout)
	if err != nil {
		return nil, err
	}
	in, ok := driver.As[driver.Inspector](st.Store)
	if !ok {
		return st, nil
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	// A store's first call dials its servers (and loads scripts) within
	// the store's own per-call bound, which a Redlock node keeps short
	// (50 ms): a cold first call that times out is tried again, within
	// connectTimeout, before the store is called unreachable. A refused
	// connection is not: the server is not there.
	for attempt := 1; ; attempt++ {
		_, err = in.Inspect(pctx, connectProbeKey)
		if err == nil || !slowAnswer(err) || attempt == connectAttempts || pctx.Err() != nil {
			break
		}
	}
	switch {
	case err == nil, errors.Is(err, errors.ErrUnsupported):
		return st, nil
	case errors.Is(err, driver.ErrRefused) || refusedByServer(err):
		_ = st.Close()
		return nil, exitWith(ExitRefused, &textError{msg: fmt.Sprintf("%s refused: %v", st.Desc, refusal(err, connectProbeKey)), err: err})
	}
	_ = st.Close()
	return nil, exitWith(ExitUnavailable, unreachable(st.Desc, err))
}

// slowAnswer reports whether err is a timeout (the store answered too
// late, or not yet) rather than a refusal or a closed port.
func slowAnswer(err error) bool {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return strings.Contains(strings.ToLower(err.Error()), "timeout")
}

// refusedByServer reports whether err is a server's answer that retrying
// cannot change: failed authentication (WRONGPASS, NOAUTH) or a missing
// permission (NOPERM). Such a server is reachable, so "cannot reach" would
// send the user looking in the wrong place.
func refusedByServer(err error) bool {
	if err == nil {
		return false
	}
	for _, code := range []string{"WRONGPASS", "NOAUTH", "NOPERM"} {
		if strings.Contains(err.Error(), code) {
			return true
		}
	}
	return false
}

// exitFor maps an error from the lock API to the CLI's exit codes.
func exitFor(err error) error {
	var ee *exitError
	if !errors.As(err, &ee) {
		err = plain(err)
	}
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return err
	case errors.Is(err, dlock.ErrInvalid):
		return exitWith(ExitUsage, err)
	case errors.Is(err, dlock.ErrLost):
		return exitWith(ExitLost, err)
	case errors.Is(err, dlock.ErrRefused): // before ErrNotAcquired, which a refused wait also matches
		return exitWith(ExitRefused, err)
	case errors.Is(err, dlock.ErrUnavailable):
		return exitWith(ExitUnavailable, err)
	case errors.Is(err, dlock.ErrNotAcquired):
		return exitWith(ExitNotAcquired, err)
	}
	return exitWith(ExitUnavailable, err)
}

// abbrev shortens an owner token for display: the token is a bearer secret
// (whoever knows it can release the lock), so only a prefix long enough to
// tell holders apart is ever shown: at most 6 characters and at most half
// the token. The text output adds "…"; the JSON gives the prefix as it is.
func abbrev(token string) string {
	n := min(6, utf8.RuneCountInString(token)/2)
	return string([]rune(token)[:n])
}

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// roundDur rounds a duration for display.
func roundDur(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

func msDur(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
