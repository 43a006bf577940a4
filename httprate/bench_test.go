package httprate_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/httprate"
)

// BenchmarkMiddleware is the cost per admitted request on memstore, with
// allocations, against the bare handler (the recorder's own cost).
func BenchmarkMiddleware(b *testing.B) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:1000"
	for name, h := range map[string]http.Handler{
		"bare":     ok,
		"admitted": newMiddleware(b, dlock.RateLimit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}, httprate.Options{}),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}
