package sqlsession_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/internal/sqlsession"
)

// TestKillWaitsForStatement: Kill on a connection whose statement is still
// running (its Run's caller gave up, as pgstore's mark release does when
// the reply is late) does not close the connection under the statement:
// the connection is dead at once, the hook runs only after the statement
// returned, and the connection is given up after the hook. Control: Kill
// on an idle connection calls the hook before it returns.
func TestKillWaitsForStatement(t *testing.T) {
	var running, underStmt atomic.Bool
	killed := make(chan struct{}, 2)
	dropped := make(chan struct{}, 2)
	s := sqlsession.New(sqlsession.Config{MaxConns: 2, MaxWaiting: 1, Timeout: time.Minute, ErrLimit: errLimit, ErrClosed: errClosed},
		sqlsession.Hooks[*fake]{
			Open: func(context.Context) (*fake, error) { return &fake{}, nil },
			Drop: func(*sqlsession.Conn[*fake]) { dropped <- struct{}{} },
			Kill: func(*sqlsession.Conn[*fake]) {
				if running.Load() {
					underStmt.Store(true)
				}
				killed <- struct{}{}
			},
			Broken: func(_ *fake, err error) bool { return errors.Is(err, errBroke) },
		})
	p, err := s.Pick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.AddLock(p)
	s.Unuse(p)

	started, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err = s.Run(ctx, p, func(context.Context, *fake) (any, error) {
		running.Store(true)
		close(started)
		<-release
		running.Store(false)
		return nil, nil
	}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run whose caller gave up: %v, want context.Canceled", err)
	}
	s.Kill(p)
	if !s.Dead(p) {
		t.Fatal("a killed connection is not dead")
	}
	select {
	case <-killed:
		t.Fatal("Kill closed the connection while its statement was running")
	default:
	}
	close(release)
	wait(t, killed, "the kill after the statement")
	s.DropLock(p)
	wait(t, dropped, "the killed connection given up")
	if underStmt.Load() {
		t.Fatal("the kill hook ran under the statement")
	}

	// Control: an idle connection is killed before Kill returns.
	q, err := s.Pick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.Kill(q)
	select {
	case <-killed:
	default:
		t.Fatal("Kill of an idle connection did not call the hook at once")
	}
	s.Unuse(q)
	wait(t, dropped, "the idle killed connection given up")
}

// wait receives from ch within 10s (slack for a loaded machine; it takes
// microseconds) or fails with what.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10s", what)
	}
}
