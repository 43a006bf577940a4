package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
)

// The seed's stock scenario, shared by the SQL stores: buyers in two
// processes (the test and a child) lock, read the stock, and if some is
// left write stock-1 and record the sale, while a fault proxy resets every
// connection or holds the replies at seeded random times. Invariant: no
// oversell and no lost update (sales = initial - final, final >= 0). The
// store's test supplies the buy function (its lock, its fenced SQL), the
// child and the count; this file runs and judges.

// ErrStale is a fenced access refused: a newer holder has claimed the
// resource. A buy function returns it (or wraps it) so that StockResult
// counts the refusals.
var ErrStale = errors.New("stale fence")

// Stock sizes a run: Workers buyers per process, each making Rounds
// requests, on a stock of Initial units.
type Stock struct {
	Workers, Rounds, Initial int
}

// RequestTimeout bounds each buy request.
const RequestTimeout = 20 * time.Second

// BuyFunc sells one unit to buyer if the stock has some; it reports
// whether it sold.
type BuyFunc func(ctx context.Context, buyer string) (bool, error)

// StockResult counts one process's requests. Its zero value is ready to
// use; it is safe for concurrent use.
type StockResult struct {
	Sold, Out, Errs atomic.Int64
	Stale           atomic.Int64 // errors that are ErrStale
	sample          atomic.Value // the first error's text, on one line
}

// fail counts err.
func (r *StockResult) fail(err error) {
	r.Errs.Add(1)
	if errors.Is(err, ErrStale) {
		r.Stale.Add(1)
	}
	r.sample.CompareAndSwap(nil, strings.ReplaceAll(err.Error(), "\n", " | "))
}

// String is the result on one line.
func (r *StockResult) String() string {
	return fmt.Sprintf("%d sold, %d out of stock, %d errors (%d stale-fence refusals; first: %v)",
		r.Sold.Load(), r.Out.Load(), r.Errs.Load(), r.Stale.Load(), r.sample.Load())
}

// Buy runs s.Workers buyers named who-<worker>-<round>, each making
// s.Rounds requests with buy, and counts them in res. A failed request
// (the faults make some) is counted, not fatal; each is bounded by
// RequestTimeout and ctx. It returns ctx's error once all are done.
func (s Stock) Buy(ctx context.Context, who string, buy BuyFunc, res *StockResult) error {
	var wg sync.WaitGroup
	for w := range s.Workers {
		wg.Go(func() {
			for r := range s.Rounds {
				rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
				ok, err := buy(rctx, fmt.Sprintf("%s-%d-%d", who, w, r))
				cancel()
				switch {
				case err != nil:
					res.fail(err)
				case ok:
					res.Sold.Add(1)
				default:
					res.Out.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// Verdict judges a run's outcome: the units sold (the sales recorded) and
// the final stock. It returns the lost updates and the units oversold,
// and an error when a safe run (wantSafe) lost or oversold or sold
// nothing, or when an unsafe one (the negative control) shows no
// violation.
func (s Stock) Verdict(final, sold int, wantSafe bool) (lost, oversold int, err error) {
	lost = sold - (s.Initial - final)
	oversold = max(0, sold-s.Initial) + max(0, -final)
	switch {
	case wantSafe && (lost != 0 || oversold != 0):
		err = fmt.Errorf("%d lost updates, %d oversold", lost, oversold)
	case wantSafe && sold == 0:
		err = errors.New("nothing sold: the scenario did not run")
	case !wantSafe && lost == 0 && oversold == 0:
		err = errors.New("negative control: without a lock no update was lost: the scenario cannot see violations")
	}
	return lost, oversold, err
}

// StockChild is the body of a child's stock role: it says "ready", waits
// for a line (the parent's "go": both processes start together), runs
// work, says "result <its counts>" and returns work's error.
func StockChild(work func(*StockResult) error) error {
	fmt.Println("ready")
	if _, err := ReadLine(); err != nil {
		return err
	}
	var res StockResult
	err := work(&res)
	fmt.Println("result", res.String())
	return err
}

// StockRun is one run of the scenario in one mode.
type StockRun struct {
	Mode     string
	Seed     uint64
	WantSafe bool // false for the negative control (no lock)
	Stock    Stock
	Faults   FaultPlan
	Proxy    Faulter // what the faults act on: the proxy both processes' locks go through
	Child    *Child  // started on a role that runs StockChild
	// Work runs this process's buyers (Stock.Buy, named "parent").
	Work func(*StockResult) error
	// Count reads the final stock and the number of sales recorded.
	Count func() (final, sold int, err error)
}

// Run starts both processes' buyers together, injects the faults until
// both are done, and fails t when a process failed or the Verdict is an
// error (with the seed, which reruns the faults).
func (r StockRun) Run(t testing.TB) {
	t.Helper()
	r.Child.Read("ready")
	r.Child.Send("go")
	stop := make(chan struct{})
	faults := make(chan int, 1)
	go func() { faults <- r.Faults.Inject(r.Proxy, r.Seed, stop) }()
	var res StockResult
	start := time.Now()
	werr := r.Work(&res)
	childRes := r.Child.Read("result")
	cerr := r.Child.Wait()
	took := time.Since(start)
	close(stop)
	nf := <-faults
	if werr != nil || cerr != nil {
		t.Fatalf("buyers: %v; child: %v", werr, cerr)
	}
	final, sold, err := r.Count()
	if err != nil {
		t.Fatal(err)
	}
	lost, oversold, verr := r.Stock.Verdict(final, sold, r.WantSafe)
	t.Logf("RESULT %s: %v, %d faults; total sold %d, final stock %d, lost updates %d, oversold %d; parent: %s; child: %s",
		r.Mode, took.Round(time.Millisecond), nf, sold, final, lost, oversold, &res, childRes)
	if verr != nil {
		t.Fatalf("%s: %v (seed %d)", r.Mode, verr, r.Seed)
	}
}

// Faulter is what the faults act on (a *faultproxy.Proxy).
type Faulter interface {
	Hold(d faultproxy.Direction) (release func())
	ResetAll()
}

// FaultPlan says when the faults come: at most Max of them, Gap plus up to
// GapSpread apart; one in three holds the replies for Hold plus up to
// HoldSpread, the others reset every connection. Spreads are counted in
// whole milliseconds.
type FaultPlan struct {
	Max              int
	Gap, GapSpread   time.Duration
	Hold, HoldSpread time.Duration
}

// Inject makes p's faults by the plan, drawn from seed, until stop closes
// or Max are made; it returns how many it made.
func (f FaultPlan) Inject(p Faulter, seed uint64, stop <-chan struct{}) int {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for n := 0; n < f.Max; n++ {
		select {
		case <-stop:
			return n
		case <-time.After(jitter(rng, f.Gap, f.GapSpread)):
		}
		if rng.IntN(3) == 0 {
			release := p.Hold(faultproxy.Downstream)
			select {
			case <-stop:
			case <-time.After(jitter(rng, f.Hold, f.HoldSpread)):
			}
			release()
			continue
		}
		p.ResetAll()
	}
	return f.Max
}

// jitter returns base plus a random whole number of milliseconds below
// spread (base itself for a spread under 1 ms).
func jitter(rng *rand.Rand, base, spread time.Duration) time.Duration {
	ms := int(spread / time.Millisecond)
	if ms <= 0 {
		return base
	}
	return base + time.Duration(rng.IntN(ms))*time.Millisecond
}
