package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Report collects a doctor's checks: a store's Doctor adds them one by one
// and returns the Report.
type Report []Check

// Add adds the check name with its verdict and a detail made by
// fmt.Sprintf(format, args...).
func (r *Report) Add(name string, st Status, format string, args ...any) {
	*r = append(*r, Check{Name: name, Status: st, Detail: fmt.Sprintf(format, args...)})
}

// ProbeStep is one step of a probe lock (Probe): "acquire", "extend" or
// "release", with its round trip.
type ProbeStep struct {
	Name  string
	Took  time.Duration
	Grant Grant // acquire and extend
	Err   error
}

// Probe takes a lock on a fresh probe key ("dlock-doctor-probe-" and 8 hex
// digits, never a user's) with a fresh token for ttl through m, extends it
// too when extend is set, and releases it, timing each step; a failed
// acquire ends the probe (its step is the last), a failed extension does
// not (the probe must not stay held). Release runs even when ctx has
// ended. It returns the key and the steps run.
func Probe(ctx context.Context, m Mutex, ttl time.Duration, extend bool) (string, []ProbeStep) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	key, token := "dlock-doctor-probe-"+hex.EncodeToString(b[:4]), hex.EncodeToString(b[:])
	var steps []ProbeStep
	step := func(name string, f func() (Grant, error)) error {
		start := time.Now()
		g, err := f()
		steps = append(steps, ProbeStep{Name: name, Took: time.Since(start), Grant: g, Err: err})
		return err
	}
	if step("acquire", func() (Grant, error) { return m.Acquire(ctx, key, token, ttl) }) != nil {
		return key, steps
	}
	if extend {
		_ = step("extend", func() (Grant, error) { return m.Extend(ctx, key, token, ttl) })
	}
	_ = step("release", func() (Grant, error) { return Grant{}, m.Release(context.WithoutCancel(ctx), key, token) })
	return key, steps
}

// ProbeLock is a doctor's "probe lock" check: Probe without the extension,
// OK with the time it took and the grant's fence and TTL, or Fail naming
// the step that failed and where (the store's table, or "" for none).
func ProbeLock(ctx context.Context, m Mutex, ttl time.Duration, where string) Check {
	key, steps := Probe(ctx, m, ttl, false)
	if where != "" {
		where = " on " + where
	}
	var took time.Duration
	for _, s := range steps {
		took += s.Took
		if s.Err != nil {
			return Check{Name: "probe lock", Status: Fail, Detail: fmt.Sprintf("%s %s%s: %v", s.Name, key, where, s.Err)}
		}
	}
	g := steps[0].Grant
	return Check{Name: "probe lock", Status: OK, Detail: fmt.Sprintf("acquired and released%s in %v (fence %d, ttl %v)",
		where, took.Round(time.Microsecond), g.Fence, g.TTL.Round(time.Millisecond))}
}
