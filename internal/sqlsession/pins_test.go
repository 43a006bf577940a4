package sqlsession_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlsession"
)

// fake is a connection of the tests' dialect.
type fake struct {
	id     int
	killed bool
}

type dialect struct {
	mu      sync.Mutex
	opened  int
	dropped []int
}

var (
	errLimit  = errors.Join(driver.ErrUnavailable, errors.New("limit"))
	errClosed = errors.Join(driver.ErrInvalid, errors.New("closed"))
	errBroke  = errors.New("broken pipe")
)

func newPins(d *dialect, cfg sqlsession.Config) *sqlsession.Pins[*fake] {
	cfg.ErrLimit, cfg.ErrClosed = errLimit, errClosed
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	return sqlsession.New(cfg, sqlsession.Hooks[*fake]{
		Open: func(context.Context) (*fake, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.opened++
			return &fake{id: d.opened}, nil
		},
		Drop: func(p *sqlsession.Conn[*fake]) {
			d.mu.Lock()
			d.dropped = append(d.dropped, p.C.id)
			d.mu.Unlock()
		},
		Kill:   func(p *sqlsession.Conn[*fake]) { p.C.killed = true },
		Broken: func(_ *fake, err error) bool { return errors.Is(err, errBroke) },
	})
}

// TestPerConnAndLimit: locks fill a connection up to PerConn before the
// next is pinned; past MaxConns, Pick is refused with an error wrapping
// ErrLimit (so matching ErrUnavailable) and pins nothing. Control: a lock
// released makes room again on the same connection.
func TestPerConnAndLimit(t *testing.T) {
	d := &dialect{}
	s := newPins(d, sqlsession.Config{MaxConns: 2, MaxWaiting: 2, PerConn: 2})
	ctx := context.Background()
	var got []*sqlsession.Conn[*fake]
	for range 4 {
		p, err := s.Pick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.AddLock(p)
		s.Unuse(p)
		got = append(got, p)
	}
	if got[0] != got[1] || got[2] != got[3] || got[0] == got[2] || s.Len() != 2 {
		t.Fatalf("4 locks at 2 per connection: %d connections, order %v", s.Len(), got)
	}
	_, err := s.Pick(ctx)
	if !errors.Is(err, errLimit) || !errors.Is(err, driver.ErrUnavailable) || s.Len() != 2 || d.opened != 2 {
		t.Fatalf("past the limit: %v, %d pinned, %d opened; want the limit error and nothing pinned", err, s.Len(), d.opened)
	}
	s.DropLock(got[0])
	p, err := s.Pick(ctx)
	if err != nil || p != got[0] {
		t.Fatalf("after a release: %v on %v, want the first connection", err, p)
	}
	s.Unuse(p)
}

// TestIdleConnectionIsDropped: a connection with no lock and no use is
// given up at once; one with a lock is kept.
func TestIdleConnectionIsDropped(t *testing.T) {
	d := &dialect{}
	s := newPins(d, sqlsession.Config{MaxConns: 2, MaxWaiting: 1})
	p, err := s.Pick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.AddLock(p)
	s.Unuse(p)
	if s.Len() != 1 || len(d.dropped) != 0 {
		t.Fatalf("a connection with a lock: %d pinned, dropped %v", s.Len(), d.dropped)
	}
	s.DropLock(p)
	if s.Len() != 0 || len(d.dropped) != 1 {
		t.Fatalf("a connection with nothing: %d pinned, dropped %v", s.Len(), d.dropped)
	}
}

// TestWaitsAreBounded: MaxWaiting bounds the connections pinned for
// queued waits, with the limit error.
func TestWaitsAreBounded(t *testing.T) {
	s := newPins(&dialect{}, sqlsession.Config{MaxConns: 3, MaxWaiting: 1})
	if _, err := s.Pin(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pin(context.Background(), true); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("a second wait with MaxWaiting 1: %v", err)
	}
	if _, err := s.Pin(context.Background(), false); err != nil {
		t.Fatalf("a holding connection beside the wait: %v", err)
	}
}

// TestRunBrokenKills: a statement whose error broke the connection kills
// it and returns ErrConnDead; the next statement on it does too, without
// running; Pick then pins another.
func TestRunBrokenKills(t *testing.T) {
	d := &dialect{}
	s := newPins(d, sqlsession.Config{MaxConns: 2, MaxWaiting: 1})
	ctx := context.Background()
	p, _ := s.Pick(ctx)
	s.AddLock(p)
	_, err := s.Run(ctx, p, func(context.Context, *fake) (any, error) { return nil, errBroke }, nil)
	if !errors.Is(err, sqlsession.ErrConnDead) || !errors.Is(err, errBroke) || !p.C.killed || !s.Dead(p) {
		t.Fatalf("broken statement: %v, killed %v", err, p.C.killed)
	}
	ran := false
	if _, err := s.Run(ctx, p, func(context.Context, *fake) (any, error) { ran = true; return nil, nil }, nil); !errors.Is(err, sqlsession.ErrConnDead) || ran {
		t.Fatalf("statement on a dead connection: %v, ran %v", err, ran)
	}
	s.Unuse(p)
	q, err := s.Pick(ctx)
	if err != nil || q == p {
		t.Fatalf("Pick after the death: %v, same connection %v", err, q == p)
	}
	s.Unuse(q)
}

// TestRunAbandoned: when the caller's context ends first, Run returns at
// once with its error, the statement goes on (its context not cancelled)
// and its outcome goes to late. Control: with time, the outcome is Run's.
func TestRunAbandoned(t *testing.T) {
	s := newPins(&dialect{}, sqlsession.Config{MaxConns: 1, MaxWaiting: 0})
	p, _ := s.Pick(context.Background())
	defer s.Unuse(p)
	release := make(chan struct{})
	lateGot := make(chan any, 1)
	stmt := func(ctx context.Context, _ *fake) (any, error) {
		<-release
		return "granted", ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err := s.Run(ctx, p, stmt, func(_ context.Context, _ *fake, v any, err error) { lateGot <- v })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned: %v", err)
	}
	close(release)
	select {
	case v := <-lateGot:
		if v != "granted" {
			t.Fatalf("late got %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("late never ran")
	}
	v, err := s.Run(context.Background(), p, stmt, nil)
	if err != nil || v != "granted" {
		t.Fatalf("control: %v, %v", v, err)
	}
}

// TestCloseClaims: Close claims the open connections that are not
// waiting, and later pins fail with ErrClosed.
func TestCloseClaims(t *testing.T) {
	s := newPins(&dialect{}, sqlsession.Config{MaxConns: 3, MaxWaiting: 1})
	ctx := context.Background()
	a, _ := s.Pin(ctx, false)
	_, _ = s.Pin(ctx, true)
	s.AddLock(a)
	if got := s.Close(); len(got) != 1 || got[0] != a {
		t.Fatalf("Close claimed %v, want the holding connection only", got)
	}
	if _, err := s.Pick(ctx); !errors.Is(err, errClosed) {
		t.Fatalf("Pick after Close: %v", err)
	}
	if got := s.Close(); got != nil {
		t.Fatalf("second Close claimed %v", got)
	}
}

// TestWaitEnds: a queued wait whose context ends is ended on the server
// (cancel) and its connection killed, so a grant racing the cancel is
// freed; when the server cannot be asked (cancel fails) the statement's
// own context ends it at once; a closed stop ends it with ErrClosed. A
// wait that completes keeps its connection.
func TestWaitEnds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cancelErr error
		stop      bool
	}{{"Cancelled", nil, false}, {"CancelFails", errBroke, false}, {"Stopped", nil, true}, {"Granted", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newPins(&dialect{}, sqlsession.Config{MaxConns: 2, MaxWaiting: 1})
			p, err := s.Pin(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			server := make(chan struct{}) // closed: the server ends the wait
			stop := make(chan struct{})
			ctx, cancelCtx := context.WithCancel(context.Background())
			defer cancelCtx()
			switch {
			case tc.stop:
				close(stop)
			case tc.name == "Granted":
				close(server)
			default:
				cancelCtx()
			}
			start := time.Now()
			v, err := s.Wait(ctx, p, stop, 5*time.Second, func(ctx context.Context, _ *fake) (any, error) {
				select {
				case <-server:
					return "granted", nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}, func(*sqlsession.Conn[*fake]) error {
				if tc.cancelErr == nil {
					close(server)
				}
				return tc.cancelErr
			})
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("Wait took %v", el)
			}
			switch tc.name {
			case "Granted":
				if err != nil || v != "granted" || p.C.killed {
					t.Fatalf("granted: %v, %v, killed %v", v, err, p.C.killed)
				}
				return
			case "Stopped":
				if !errors.Is(err, errClosed) {
					t.Fatalf("stopped: %v", err)
				}
			default:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled: %v", err)
				}
			}
			if !p.C.killed || s.Len() != 0 {
				t.Fatalf("ended wait: killed %v, %d pinned", p.C.killed, s.Len())
			}
		})
	}
}
