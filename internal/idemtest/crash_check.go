package idemtest

import (
	"context"
	"errors"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"example.com/dlock"
)

// CrashAfterCharge: the payer, a child process started by start on the
// store at storeURL, is killed or paused after its charge and is taken
// over after its lease by a retry (a waiting Do in the test, on a client
// of its own of storeURL), which charges again with the same derived key:
// two attempts, one charge. The paused payer, resumed after the takeover
// completed, cannot store its result ("stale"). Control: a charge keyed by
// the fence charges twice. Each case uses a key of its own, so that one
// store serves all three.
func CrashAfterCharge(t *testing.T, storeURL string, start StartFunc) {
	for _, tc := range []struct {
		name, mode, how string
		charges         int
	}{{"killed", "derived", "kill", 1}, {"paused", "derived", "pause", 1}, {"control-fence-key", "fence", "kill", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			p := &provider{charged: map[string]bool{}}
			srv := httptest.NewServer(p)
			t.Cleanup(srv.Close)
			key := "order-9-" + tc.name
			child := start(t, ctx, envStore+"="+storeURL, envProvider+"="+srv.URL, envKey+"="+key, envMode+"="+tc.mode)
			child.Read("charged")
			stopped := time.Now()
			if tc.how == "kill" {
				child.Signal(syscall.SIGKILL)
				_ = child.Wait()
			} else {
				child.Signal(syscall.SIGSTOP)
			}
			g, err := dlock.NewGuard(OpenURL(t, storeURL), time.Hour, dlock.WithWait(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var took bool
			r, err := g.Do(ctx, key, "fp", func(ctx context.Context, e dlock.Execution) ([]byte, error) {
				took = e.TookOver
				return []byte("retry"), charge(ctx, srv.URL, e, tc.mode)
			})
			after := time.Since(stopped)
			if err != nil || r.Replayed || !took {
				t.Fatalf("the retry = %+v, %v (took over: %v); want it to take over and run", r, err, took)
			}
			if tc.how == "pause" {
				child.Resume("")
				child.Read("stale")
			}
			attempts, charges := p.counts()
			t.Logf("%s (%s key): the retry took over %v after the stop (lease %v); %d charge attempts, %d charges",
				tc.how, tc.mode, after.Round(time.Millisecond), payerLease, attempts, charges)
			if attempts != 2 || charges != tc.charges {
				t.Fatalf("%d attempts, %d charges; want 2 attempts, %d charges", attempts, charges, tc.charges)
			}
			again, err := g.Do(ctx, key, "fp", func(context.Context, dlock.Execution) ([]byte, error) { return nil, errors.New("ran") })
			if err != nil || string(again.Value) != "retry" {
				t.Fatalf("replay = %q, %v; want the retry's result", again.Value, err)
			}
		})
	}
}
