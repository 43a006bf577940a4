package idemtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
)

// The crash between the charge and the completion: an executor process
// (the test binary's payer role, opened on the store's URL) charges a
// fake payment provider, then is killed (SIGKILL) or paused (SIGSTOP)
// before it completes the record. The provider is an HTTP server of the
// test: every charge attempt counts, and the set of the charges'
// idempotency keys is what it actually charges (it deduplicates by key,
// as Stripe does).

// The payer's environment (see Payer).
const (
	envStore    = "DLOCK_IDEMTEST_STORE"    // the store's URL
	envProvider = "DLOCK_IDEMTEST_PROVIDER" // the provider's URL
	envKey      = "DLOCK_IDEMTEST_KEY"      // the request's idempotency key
	envMode     = "DLOCK_IDEMTEST_MODE"     // "derived" or "fence"
)

// payerLease is the payer's lease, renewed while it runs (WithAutoRenew):
// a retry takes it over this long after the payer stops.
const payerLease = 600 * time.Millisecond

// StartFunc starts the test binary's payer role (a role whose function is
// Payer) as a child of t, with env added to its environment.
type StartFunc func(t testing.TB, ctx context.Context, env ...string) *faulttest.Child

// provider is the fake payment provider: attempts counted, charges
// deduplicated by their idempotency key.
type provider struct {
	mu       sync.Mutex
	attempts int
	charged  map[string]bool
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts++
	p.charged[r.URL.Query().Get("key")] = true
	w.WriteHeader(http.StatusCreated)
}

func (p *provider) counts() (attempts, charges int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts, len(p.charged)
}

// charge is one charge attempt at the provider for e. mode "fence" keys
// it by the execution's fence (the negative control: a key that changes
// with a takeover), "derived" by e.DownstreamKey.
func charge(ctx context.Context, providerURL string, e dlock.Execution, mode string) error {
	key := e.DownstreamKey("charge")
	if mode == "fence" {
		key = fmt.Sprint("fence-", e.Fence)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, providerURL+"/charge?key="+url.QueryEscape(key), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("provider: %s", resp.Status)
	}
	return nil
}

// Payer is the payer role, for the test binary's child: it opens the
// store at the URL its environment names, runs the payment in a Guard's Do
// (lease payerLease, renewed), charges the provider, says "charged" and
// waits for a line on stdin before returning its result; then it says how
// the completion went: "stored", "stale" or "error <err>".
func Payer() error {
	ctx := context.Background()
	store, closeStore, err := openURL(ctx, os.Getenv(envStore))
	if err != nil {
		return err
	}
	defer closeStore()
	g, err := dlock.NewGuard(store, time.Hour, dlock.WithAutoRenew(payerLease))
	if err != nil {
		return err
	}
	_, err = g.Do(ctx, os.Getenv(envKey), "fp", func(ctx context.Context, e dlock.Execution) ([]byte, error) {
		if err := charge(ctx, os.Getenv(envProvider), e, os.Getenv(envMode)); err != nil {
			return nil, err
		}
		fmt.Println("charged")
		_, _ = faulttest.ReadLine() // killed here, or paused
		return []byte("child"), nil
	})
	switch {
	case err == nil:
		fmt.Println("stored")
	case errors.Is(err, dlock.ErrStaleFence):
		fmt.Println("stale")
	default:
		fmt.Println("error", err)
	}
	return nil
}
