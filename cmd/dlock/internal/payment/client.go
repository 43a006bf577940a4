package payment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"example.com/dlock/idemhttp"
)

// tally is what the client saw, summed over its requests.
type tally struct {
	mu                                   sync.Mutex
	requests, replays, conflicts, errors int
	dropped, failed                      int
	sample                               string
}

func (t *tally) add(f func(t *tally)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
}

// Bounds of a click's retries: a 409 is asked again after conflictPause,
// up to maxAsks requests per click.
const (
	conflictPause = 25 * time.Millisecond
	maxAsks       = 400
)

// client pays orders: each request carries the order's Idempotency-Key
// and the same body, as a browser's second click or a retry does.
type client struct {
	http     *http.Client
	strategy string
	t        *tally
}

// pay asks targets[0] to pay order, moving on to the next target when an
// instance drops the request (it died), and asking again after a 409 or
// a 5xx (not stored) until it gets the payment's answer. It reports
// whether it got one.
func (c *client) pay(ctx context.Context, order string, targets []string) bool {
	for asks := 0; asks < maxAsks && len(targets) > 0; asks++ {
		status, replayed, err := c.ask(ctx, targets[0], order)
		switch {
		case err != nil && ctx.Err() != nil:
			c.t.add(func(t *tally) { t.errors++ })
			return false
		case err != nil: // the instance died under the request: retry on the next
			c.t.add(func(t *tally) { t.dropped++ })
			targets = targets[1:]
		case status >= 500: // not stored: ask again with the same key
			c.t.add(func(t *tally) { t.failed++ })
			if !pause(ctx, conflictPause) {
				return false
			}
		case status == http.StatusOK:
			c.t.add(func(t *tally) {
				if replayed {
					t.replays++
				}
			})
			return true
		case status == http.StatusConflict:
			c.t.add(func(t *tally) { t.conflicts++ })
			if !pause(ctx, conflictPause) {
				return false
			}
		default:
			c.t.add(func(t *tally) {
				t.errors++
				if t.sample == "" {
					t.sample = fmt.Sprintf("%s: HTTP %d", order, status)
				}
			})
			return false
		}
	}
	c.t.add(func(t *tally) {
		t.errors++
		if t.sample == "" {
			t.sample = order + ": no answer from any instance"
		}
	})
	return false
}

// ask sends one payment request for order to base.
func (c *client) ask(ctx context.Context, base, order string) (status int, replayed bool, err error) {
	c.t.add(func(t *tally) { t.requests++ })
	body := fmt.Sprintf(`{"order":%q,"amount_cents":1999}`, order)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/pay/"+c.strategy+"?order="+order, strings.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set(idemhttp.KeyHeader, strconv.Quote(order))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, false, err
	}
	return resp.StatusCode, resp.Header.Get(idemhttp.ReplayedHeader) == "true", nil
}

// pause waits d unless ctx ends first; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

var errNoCharge = errors.New("payment: the doomed instance did not charge every order in time")
