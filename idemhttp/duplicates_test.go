package idemhttp_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/idemhttp"
	"example.com/dlock/internal/idemtest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/memstore"
	_ "example.com/dlock/redisstore" // redis:// URLs
)

// stores opens, for each kind, a fresh store and returns the function that
// gives an instance its client of it (the same memstore; a client of its
// own of one real server, by its URL).
func stores() map[string]func(t testing.TB) func(testing.TB) driver.Idempotency {
	byURL := func(url string) func(testing.TB) driver.Idempotency {
		return func(t testing.TB) driver.Idempotency { return idemtest.OpenURL(t, url) }
	}
	return map[string]func(t testing.TB) func(testing.TB) driver.Idempotency{
		"memstore": func(testing.TB) func(testing.TB) driver.Idempotency {
			s := memstore.New(nil)
			return func(testing.TB) driver.Idempotency { return s }
		},
		"redis":         func(t testing.TB) func(testing.TB) driver.Idempotency { return byURL(redisserver.Start(t).URL()) },
		"redis-cluster": func(t testing.TB) func(testing.TB) driver.Idempotency { return byURL(clusterURL(t)) },
	}
}

// clusterURL starts a Redis Cluster of 3 masters and returns its URL.
func clusterURL(t testing.TB) string {
	return "redis+cluster://" + strings.Join(redisserver.StartCluster(t, 3).Addrs(), ",")
}

// Twenty identical requests at once on two instances sharing a store
// (idemtest.Twenty): the handler runs once; the others get 409 or the
// replay, byte-exact; another body with the key gets 422. Control: without
// the middleware they charge more than once.
func TestTwentyDuplicatesChargeOnce(t *testing.T) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) { idemtest.Twenty(t, open(t)) })
	}
}

// Keys are validated before anything runs: missing (required), not a
// structured-field string, empty, too long, two field lines: 400; the
// handler never runs.
func TestBadKeysAre400(t *testing.T) {
	h := &idemtest.Payments{}
	srv := idemtest.Instance(t, memstore.New(nil), h)
	long := `"` + string(bytes.Repeat([]byte("k"), idemhttp.MaxKeyLen+1)) + `"`
	for _, key := range []string{"", "order-7", `""`, long, `"a"b"`, `"tab	"`, `"\x"`} {
		if r := idemtest.Post(t, srv.URL, key, "{}"); r.Status != http.StatusBadRequest {
			t.Errorf("key %.20q: %d %s, want 400", key, r.Status, r.Body)
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
	if r := idemtest.Post(t, srv.URL, `"esc \"q\" \\ ok"`, "{}"); r.Status != http.StatusCreated {
		t.Errorf("a key with escapes: %d %s, want 201", r.Status, r.Body)
	}
	if n := h.Charges.Load(); n != 1 {
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
		r := idemtest.Post(t, srv.URL, `"k"`, "{}")
		if r.Status != w.status || r.Replayed != w.replayed || r.Header.Get("Idempotency-Key-Retention") != "86400" {
			t.Fatalf("request %d: %d replayed %v (retention %q), want %d replayed %v, 86400", i, r.Status, r.Replayed, r.Header.Get("Idempotency-Key-Retention"), w.status, w.replayed)
		}
	}
	if r := idemtest.Post(t, srv.URL, "", "{}"); r.Status != http.StatusCreated || r.Replayed || calls.Load() != 3 {
		t.Fatalf("no key, not required: %d, %d calls; want the handler run", r.Status, calls.Load())
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
