package idemtest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/idemhttp"
)

// Payments is a handler that charges: a charge counted per call, 201 with
// a Location, a Content-Type and a header the middleware does not store.
type Payments struct{ Charges atomic.Int32 }

func (p *Payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n := p.Charges.Add(1)
	time.Sleep(20 * time.Millisecond) // the charge: work that widens the window a duplicate needs
	e, _ := idemhttp.ExecutionFrom(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", n))
	w.Header().Set("X-Not-Stored", "1")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"charge":%d,"key":%q,"body":%q}`, n, e.DownstreamKey("charge"), body)
}

// Instance is one server of the service: h behind idemhttp (keys
// required, retention 1 h) on a Guard on store, or h alone when store is
// nil. It is closed when t ends.
func Instance(t testing.TB, store driver.Idempotency, h http.Handler) *httptest.Server {
	t.Helper()
	if store == nil {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}
	g, err := dlock.NewGuard(store, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(g, &idemhttp.Options{Required: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(h))
	t.Cleanup(srv.Close)
	return srv
}

// Reply is a response as the tests read it.
type Reply struct {
	Status   int
	Header   http.Header
	Body     string
	Replayed bool // Idempotent-Replayed: true
}

// Post sends POST url/pay with body and the Idempotency-Key key (none if
// empty); a transport error fails t (Error) and returns a zero Reply.
func Post(t testing.TB, url, key, body string) Reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/pay", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Error(err)
		return Reply{}
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return Reply{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Reply{resp.StatusCode, resp.Header, string(b), resp.Header.Get("Idempotent-Replayed") == "true"}
}

// sendTwenty sends 20 identical requests at once, alternating between the
// two instances, and returns the replies.
func sendTwenty(t testing.TB, a, b *httptest.Server, key string) []Reply {
	replies := make([]Reply, 20)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replies {
		srv := []*httptest.Server{a, b}[i%2]
		wg.Go(func() { <-gate; replies[i] = Post(t, srv.URL, key, `{"amount":10}`) })
	}
	close(gate)
	wg.Wait()
	return replies
}

// Twenty: 20 identical requests at once on two instances, each on a store
// client of its own from open (called twice: the same memstore, or two
// clients of one server): the handler runs once; the others get 409 or the
// replay, byte-exact. After them, the key replays; another body with the
// key gets 422. Control: the same twenty requests to two instances without
// the middleware charge more than once.
func Twenty(t *testing.T, open func(t testing.TB) driver.Idempotency) {
	h := &Payments{}
	a, b := Instance(t, open(t), h), Instance(t, open(t), h)
	replies := sendTwenty(t, a, b, `"order-7"`)
	var created, conflicts, replays int
	var first Reply
	for _, r := range replies {
		switch {
		case r.Status == http.StatusCreated && !r.Replayed:
			created, first = created+1, r
		case r.Status == http.StatusCreated:
			replays++
		case r.Status == http.StatusConflict:
			conflicts++
		default:
			t.Errorf("reply %d: %s", r.Status, r.Body)
		}
	}
	t.Logf("%d created, %d conflicts (409), %d replays; %d charges", created, conflicts, replays, h.Charges.Load())
	if n := h.Charges.Load(); n != 1 || created != 1 {
		t.Fatalf("%d charges and %d fresh 201s for 20 identical requests, want 1 and 1", n, created)
	}
	again := Post(t, b.URL, `"order-7"`, `{"amount":10}`)
	if !again.Replayed || again.Status != http.StatusCreated || again.Body != first.Body ||
		again.Header.Get("Location") != first.Header.Get("Location") || again.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("replay = %+v, want the first response byte-exact (%q), marked", again, first.Body)
	}
	if again.Header.Get("X-Not-Stored") != "" || again.Header.Get("Idempotency-Key-Retention") != "3600" {
		t.Fatalf("replay headers %v: want no X-Not-Stored, a retention of 3600", again.Header)
	}
	if r := Post(t, a.URL, `"order-7"`, `{"amount":99}`); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("another body with the key: %d %s, want 422", r.Status, r.Body)
	}
	ctl := &Payments{}
	sendTwenty(t, Instance(t, nil, ctl), Instance(t, nil, ctl), `"order-7"`)
	if n := ctl.Charges.Load(); n < 2 {
		t.Fatalf("control: without the middleware 20 requests charged %d times; the test cannot tell", n)
	}
}
