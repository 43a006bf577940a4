package idemhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"example.com/dlock"
	"example.com/dlock/idemhttp"
	"example.com/dlock/memstore"
)

// A POST sent twice with one Idempotency-Key runs the handler once; the
// second gets the first response back, marked. memstore stands in for a
// store shared by every instance (redisstore).
func ExampleNew() {
	guard, err := dlock.NewGuard(memstore.New(nil), 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	mw, err := idemhttp.New(guard, &idemhttp.Options{Required: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	charges := 0
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++ // e, _ := idemhttp.ExecutionFrom(r.Context()); provider.Charge(..., e.DownstreamKey("charge"))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"status":"paid"}`)
	})
	srv := httptest.NewServer(mw(pay))
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pay", strings.NewReader(`{"amount":10}`))
		req.Header.Set("Idempotency-Key", `"order-7"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201 {"status":"paid"} replayed: false
	// 201 {"status":"paid"} replayed: true
	// charges: 1
}
