package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"example.com/dlock"
	"example.com/dlock/idemhttp"
)

// BenchmarkMiddleware: the cost per request of the middleware over the
// same handler without it, in one run, on each store (a fresh key per
// request: one begin and one completion each). In process, through
// ServeHTTP: no network between client and handler, so the store's round
// trips are what the figures add.
//
//	go test -run '^$' -bench Middleware -benchtime 2000x ./idemhttp
func BenchmarkMiddleware(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"status":"paid"}`))
	})
	run := func(b *testing.B, handler http.Handler) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{"amount":10}`))
			req.Header.Set("Idempotency-Key", `"k`+strconv.Itoa(i)+`"`)
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, req)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, h) })
	for name, open := range stores() {
		if name == "redis-cluster" {
			continue // the figures are one server's
		}
		b.Run(name, func(b *testing.B) {
			g, err := dlock.NewGuard(open(b)(b), 0)
			if err != nil {
				b.Fatal(err)
			}
			mw, err := idemhttp.New(g, nil)
			if err != nil {
				b.Fatal(err)
			}
			run(b, mw(h))
		})
	}
}
