package idemhttp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/idemhttp"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/memstore"
	"example.com/dlock/redisstore"
)

// payments is the handler under test: a charge counted per call, 201 with
// a Location, a Content-Type and a header the middleware does not store.
type payments struct{ charges atomic.Int32 }

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n := p.charges.Add(1)
	time.Sleep(20 * time.Millisecond) // the charge: work that widens the window a duplicate needs
	e, _ := idemhttp.ExecutionFrom(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", n))
	w.Header().Set("X-Not-Stored", "1")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"charge":%d,"key":%q,"body":%q}`, n, e.DownstreamKey("charge"), body)
}

// instance is one server of the service: a Guard on store in front of h.
func instance(t *testing.T, store driver.Idempotency, h http.Handler) *httptest.Server {
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

type reply struct {
	status   int
	header   http.Header
	body     string
	replayed bool
}

func post(t *testing.T, url, key, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/pay", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Error(err)
		return reply{}
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b), resp.Header.Get("Idempotent-Replayed") == "true"}
}

// sendTwenty sends 20 identical requests at once, alternating between the
// two instances, and returns the replies.
func sendTwenty(t *testing.T, a, b *httptest.Server, key string) []reply {
	replies := make([]reply, 20)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replies {
		srv := []*httptest.Server{a, b}[i%2]
		wg.Go(func() { <-gate; replies[i] = post(t, srv.URL, key, `{"amount":10}`) })
	}
	close(gate)
	wg.Wait()
	return replies
}

// stores gives each test a fresh store per kind, two clients of it for the
// two instances (the same memstore; two go-redis clients of one real
// server).
func stores() map[string]func(t testing.TB) (driver.Idempotency, driver.Idempotency) {
	return map[string]func(t testing.TB) (driver.Idempotency, driver.Idempotency){
		"memstore": func(testing.TB) (driver.Idempotency, driver.Idempotency) {
			s := memstore.New(nil)
			return s, s
		},
		"redis": func(t testing.TB) (driver.Idempotency, driver.Idempotency) {
			srv := redisserver.Start(t)
			var two [2]driver.Idempotency
			for i := range two {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
				t.Cleanup(func() { _ = rdb.Close() })
				s, err := redisstore.New(rdb, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				two[i] = s
			}
			return two[0], two[1]
		},
	}
}

// Twenty identical requests at once on two instances sharing a store: the
// handler runs once; the others get 409 or the replay, byte-exact. After
// them, the key replays; another body with the key gets 422. Control: the
// same twenty requests to the two instances without the middleware charge
// more than once.
func TestTwentyDuplicatesChargeOnce(t *testing.T) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) {
			s1, s2 := open(t)
			h := &payments{}
			a, b := instance(t, s1, h), instance(t, s2, h)
			replies := sendTwenty(t, a, b, `"order-7"`)
			var created, conflicts, replays int
			var first reply
			for _, r := range replies {
				switch {
				case r.status == http.StatusCreated && !r.replayed:
					created, first = created+1, r
				case r.status == http.StatusCreated:
					replays++
				case r.status == http.StatusConflict:
					conflicts++
				default:
					t.Errorf("reply %d: %s", r.status, r.body)
				}
			}
			t.Logf("%d created, %d conflicts (409), %d replays; %d charges", created, conflicts, replays, h.charges.Load())
			if n := h.charges.Load(); n != 1 || created != 1 {
				t.Fatalf("%d charges and %d fresh 201s for 20 identical requests, want 1 and 1", n, created)
			}
			again := post(t, b.URL, `"order-7"`, `{"amount":10}`)
			if !again.replayed || again.status != http.StatusCreated || again.body != first.body ||
				again.header.Get("Location") != first.header.Get("Location") || again.header.Get("Content-Type") != "application/json" {
				t.Fatalf("replay = %+v, want the first response byte-exact (%q), marked", again, first.body)
			}
			if again.header.Get("X-Not-Stored") != "" || again.header.Get("Idempotency-Key-Retention") != "3600" {
				t.Fatalf("replay headers %v: want no X-Not-Stored, a retention of 3600", again.header)
			}
			if r := post(t, a.URL, `"order-7"`, `{"amount":99}`); r.status != http.StatusUnprocessableEntity {
				t.Fatalf("another body with the key: %d %s, want 422", r.status, r.body)
			}
			ctl := &payments{}
			sendTwenty(t, instance(t, nil, ctl), instance(t, nil, ctl), `"order-7"`)
			if n := ctl.charges.Load(); n < 2 {
				t.Fatalf("control: without the middleware 20 requests charged %d times; the test cannot tell", n)
			}
		})
	}
}

// Keys are validated before anything runs: missing (required), not a
// structured-field string, empty, too long, two field lines: 400; the
// handler never runs.
func TestBadKeysAre400(t *testing.T) {
	h := &payments{}
	srv := instance(t, memstore.New(nil), h)
	long := `"` + string(bytes.Repeat([]byte("k"), idemhttp.MaxKeyLen+1)) + `"`
	for _, key := range []string{"", "order-7", `""`, long, `"a"b"`, `"tab	"`, `"\x"`} {
		if r := post(t, srv.URL, key, "{}"); r.status != http.StatusBadRequest {
			t.Errorf("key %.20q: %d %s, want 400", key, r.status, r.body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pay", nil)
	req.Header.Add("Idempotency-Key", `"a"`)
	req.Header.Add("Idempotency-Key", `"b"`)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("two field lines: %v %v, want 400", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	if r := post(t, srv.URL, `"esc \"q\" \\ ok"`, "{}"); r.status != http.StatusCreated {
		t.Errorf("a key with escapes: %d %s, want 201", r.status, r.body)
	}
	if n := h.charges.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once (for the valid key)", n)
	}
}

// A 5xx response is sent but not stored: a retry with the key runs the
// handler again, and its 201 is then stored and replayed. Requests of
// other methods, and without the header when it is not required, pass
// through unguarded.
func TestServerErrorsAreNotStored(t *testing.T) {
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "database down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "ok")
	})
	g, err := dlock.NewGuard(memstore.New(nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(h))
	t.Cleanup(srv.Close)
	want := []struct {
		status   int
		replayed bool
	}{{http.StatusServiceUnavailable, false}, {http.StatusCreated, false}, {http.StatusCreated, true}}
	for i, w := range want {
		r := post(t, srv.URL, `"k"`, "{}")
		if r.status != w.status || r.replayed != w.replayed || r.header.Get("Idempotency-Key-Retention") != "86400" {
			t.Fatalf("request %d: %d replayed %v (retention %q), want %d replayed %v, 86400", i, r.status, r.replayed, r.header.Get("Idempotency-Key-Retention"), w.status, w.replayed)
		}
	}
	if r := post(t, srv.URL, "", "{}"); r.status != http.StatusCreated || r.replayed || calls.Load() != 3 {
		t.Fatalf("no key, not required: %d, %d calls; want the handler run", r.status, calls.Load())
	}
	resp, err := http.Get(srv.URL + "/pay")
	if err != nil || resp.StatusCode != http.StatusCreated || calls.Load() != 4 {
		t.Fatalf("GET: %v %v, %d calls; want it unguarded", resp.StatusCode, err, calls.Load())
	}
	resp.Body.Close()
}

// On a Guard made WithWait, a duplicate waits for the first response
// instead of 409, and gets it replayed (in process, in a synctest bubble:
// the duplicate arrives while the first runs).
func TestWaitingGuardReplaysInsteadOf409(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			<-release
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "paid")
		})
		g, err := dlock.NewGuard(memstore.New(nil), 0, dlock.WithWait(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		mw, err := idemhttp.New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		handler := mw(h)
		serve := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader("{}"))
			req.Header.Set("Idempotency-Key", `"k"`)
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, req)
			return w
		}
		var first, second *httptest.ResponseRecorder
		var wg sync.WaitGroup
		wg.Go(func() { first = serve() })
		synctest.Wait() // the first is in the handler
		wg.Go(func() { second = serve() })
		synctest.Wait() // the duplicate waits in the Guard
		if calls.Load() != 1 || second != nil {
			t.Fatalf("%d calls, duplicate answered %v while the first ran; want it waiting", calls.Load(), second)
		}
		close(release)
		wg.Wait()
		if first.Code != http.StatusCreated || first.Header().Get("Idempotent-Replayed") != "" ||
			second.Code != http.StatusCreated || second.Header().Get("Idempotent-Replayed") != "true" || second.Body.String() != "paid" || calls.Load() != 1 {
			t.Fatalf("first %d %v, duplicate %d %v %q, %d calls; want the duplicate to wait and get the replay",
				first.Code, first.Header(), second.Code, second.Header(), second.Body, calls.Load())
		}
	})
}
