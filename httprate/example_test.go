package httprate_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"example.com/dlock"
	"example.com/dlock/httprate"
	"example.com/dlock/memstore"
)

// Two requests a minute per client address, on a store every instance of
// the service shares (memstore stands in for Redis here): the third gets
// 429 with Retry-After; every decided response has the RateLimit fields
// (and RateLimit-Policy: default;q=2;w=60).
func Example() {
	lim, err := dlock.NewLimiter(memstore.New(nil), dlock.RateLimit{Rate: 2, Period: time.Minute, Burst: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := httprate.New(lim, httprate.Options{}) // key: the client's address; fail open
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s, Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: default;r=1;t=30, Retry-After: ""
	// 200 RateLimit: default;r=0;t=60, Retry-After: ""
	// 429 RateLimit: default;r=0;t=60, Retry-After: "30"
}
