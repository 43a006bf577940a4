package httprate_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/httprate"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// realServer serves ok behind the middleware over real HTTP, limited on a
// real Redis with policy p, and counts the limiter's errors.
func realServer(t *testing.T, srv *redisserver.Server, p httprate.Policy, errs *atomic.Int64) *httptest.Server {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	l, err := dlock.NewLimiter(st, dlock.RateLimit{Rate: 1, Period: time.Hour, Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httprate.New(l, httprate.Options{OnStoreError: p, Timeout: 200 * time.Millisecond,
		OnError: func(*http.Request, error) { errs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(m.Handler(ok))
	t.Cleanup(hs.Close)
	return hs
}

func get(t *testing.T, url string) (int, http.Header, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header, time.Since(start)
}

// TestStoreDownFollowsThePolicy, over real HTTP on a real Redis: while it
// runs, the fourth request of a burst of 3 gets 429 (the control: the
// store is deciding); frozen (SIGSTOP), each request waits at most the
// timeout and then fails open (200) or closed (503, Retry-After 1); killed
// the same, at once; OnError sees every failure.
func TestStoreDownFollowsThePolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    httprate.Policy
		code int
	}{{"open", httprate.FailOpen, 200}, {"closed", httprate.FailClosed, 503}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			var errs atomic.Int64
			hs := realServer(t, srv, tc.p, &errs)
			for i := range 4 {
				want := map[bool]int{true: 200, false: 429}[i < 3]
				if code, _, _ := get(t, hs.URL); code != want {
					t.Fatalf("request %d with the store up: %d, want %d", i+1, code, want)
				}
			}
			srv.Pause()
			code, h, took := get(t, hs.URL)
			srv.Resume()
			if code != tc.code || took > 200*time.Millisecond+2*time.Second {
				t.Fatalf("store frozen: %d after %v, want %d within the 200ms timeout (and slack)", code, took, tc.code)
			}
			srv.Kill()
			code, h, _ = get(t, hs.URL)
			if code != tc.code {
				t.Fatalf("store killed: %d, want %d", code, tc.code)
			}
			if tc.code == 503 && h.Get("Retry-After") != "1" {
				t.Fatalf("503 with Retry-After %q, want 1", h.Get("Retry-After"))
			}
			if h.Get("RateLimit") != "" {
				t.Fatalf("RateLimit %q on an undecided request, want none", h.Get("RateLimit"))
			}
			if n := errs.Load(); n != 2 {
				t.Fatalf("OnError called %d times, want 2 (frozen, killed)", n)
			}
		})
	}
}
