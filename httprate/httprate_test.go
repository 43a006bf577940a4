package httprate_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/httprate"
	"example.com/dlock/memstore"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

func newMiddleware(t testing.TB, lim dlock.RateLimit, opts httprate.Options) http.Handler {
	t.Helper()
	l, err := dlock.NewLimiter(memstore.New(nil), lim)
	if err != nil {
		t.Fatal(err)
	}
	m, err := httprate.New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m.Handler(ok)
}

// serve runs one request from addr with the given headers (name, value
// pairs) and returns the response.
func serve(h http.Handler, addr string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = addr
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func wantResponse(t *testing.T, w *httptest.ResponseRecorder, code int, fields ...string) {
	t.Helper()
	if w.Code != code {
		t.Fatalf("status %d, want %d (%s)", w.Code, code, strings.TrimSpace(w.Body.String()))
	}
	for i := 0; i+1 < len(fields); i += 2 {
		if got := w.Header().Get(fields[i]); got != fields[i+1] {
			t.Fatalf("%s: %q, want %q", fields[i], got, fields[i+1])
		}
	}
}

// TestOverTheLimitIs429WithTheFields: within the burst requests pass with
// the RateLimit fields counting down; the next gets 429 with Retry-After
// (when one comes back) and the same fields; another client has its own
// budget; a minute on, one request passes again (the bubble's clock).
func TestOverTheLimitIs429WithTheFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMiddleware(t, dlock.RateLimit{Rate: 1, Period: time.Minute, Burst: 2}, httprate.Options{})
		policy := "default;q=2;w=120"
		wantResponse(t, serve(h, "10.0.0.1:1000"), 200, "RateLimit-Policy", policy, "RateLimit", "default;r=1;t=60")
		wantResponse(t, serve(h, "10.0.0.1:1001"), 200, "RateLimit", "default;r=0;t=120")
		wantResponse(t, serve(h, "10.0.0.1:1002"), 429, "RateLimit-Policy", policy, "RateLimit", "default;r=0;t=120", "Retry-After", "60")
		wantResponse(t, serve(h, "10.0.0.2:1000"), 200, "RateLimit", "default;r=1;t=60")
		time.Sleep(time.Minute)
		wantResponse(t, serve(h, "10.0.0.1:1003"), 200, "RateLimit", "default;r=0;t=120")
		wantResponse(t, serve(h, "10.0.0.1:1004"), 429, "Retry-After", "60")
	})
}

// TestKeyFunctions: Header gives each header value a budget and falls back
// to the client's address without it; a key of any size is accepted (a
// long one is replaced by its digest, the same budget for the same key);
// an empty key is not limited and gets no fields.
func TestKeyFunctions(t *testing.T) {
	lim := dlock.RateLimit{Rate: 1, Period: time.Hour, Burst: 1}
	h := newMiddleware(t, lim, httprate.Options{Key: httprate.Header("X-Api-Key")})
	wantResponse(t, serve(h, "10.0.0.1:1", "X-Api-Key", "a"), 200)
	wantResponse(t, serve(h, "10.0.0.1:1", "X-Api-Key", "b"), 200)
	wantResponse(t, serve(h, "10.0.0.1:1", "X-Api-Key", "a"), 429)
	wantResponse(t, serve(h, "10.0.0.1:1"), 200)
	wantResponse(t, serve(h, "10.0.0.1:2"), 429) // the same address, without the header
	long := strings.Repeat("x", 10_000)
	wantResponse(t, serve(h, "10.0.0.3:1", "X-Api-Key", long), 200)
	wantResponse(t, serve(h, "10.0.0.3:1", "X-Api-Key", long), 429)
	wantResponse(t, serve(h, "10.0.0.3:1", "X-Api-Key", long+"y"), 200)

	open := newMiddleware(t, lim, httprate.Options{Key: func(*http.Request) string { return "" }})
	for range 3 {
		wantResponse(t, serve(open, "10.0.0.1:1"), 200, "RateLimit", "", "RateLimit-Policy", "")
	}
}

// TestNewRefusesBadOptions: each bad option matches ErrInvalid.
func TestNewRefusesBadOptions(t *testing.T) {
	l, err := dlock.NewLimiter(memstore.New(nil), dlock.RateLimit{Rate: 1, Period: time.Second, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		l    *dlock.Limiter
		opts httprate.Options
	}{
		"nil limiter":    {nil, httprate.Options{}},
		"policy":         {l, httprate.Options{OnStoreError: 7}},
		"timeout":        {l, httprate.Options{Timeout: -time.Second}},
		"name":           {l, httprate.Options{PolicyName: "two words"}},
		"name of digits": {l, httprate.Options{PolicyName: "1x"}},
	} {
		if _, err := httprate.New(c.l, c.opts); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := httprate.New(l, httprate.Options{PolicyName: "api-v1"}); err != nil {
		t.Fatalf("a token name: %v", err)
	}
}

// TestPolicyFollowsSetLimit: after the limiter's SetLimit, RateLimit-Policy
// states the new limit (the field is not stuck on the first one).
func TestPolicyFollowsSetLimit(t *testing.T) {
	l, err := dlock.NewLimiter(memstore.New(nil), dlock.RateLimit{Rate: 10, Period: time.Second, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httprate.New(l, httprate.Options{PolicyName: "api"})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(ok)
	wantResponse(t, serve(h, "10.0.0.1:1"), 200, "RateLimit-Policy", "api;q=10;w=1")
	if err := l.SetLimit(dlock.RateLimit{Rate: 100, Period: time.Minute, Burst: 50}); err != nil {
		t.Fatal(err)
	}
	wantResponse(t, serve(h, "10.0.0.1:1"), 200, "RateLimit-Policy", "api;q=50;w=30")
}
