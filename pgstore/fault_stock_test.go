package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The seed's stock scenario across 2 processes (this one and a child), each
// with stockWorkers buyers of stockRounds requests, through a fault proxy
// that resets every connection, or holds the replies for a moment, at
// seeded random times (bounded in count). A buyer locks, reads the stock,
// and if some is left writes stock-1 and records the sale. Invariant: no
// oversell and no lost update: sales = initial - final, final >= 0. In the
// lease and session modes the resource is fenced (the read claims the
// lease's fence, the write needs it: a buyer whose lease was lost cannot
// write after a newer holder read); in the row-lock mode the read, the
// write and the sale are in the locking transaction. Negative control:
// the same buyers without a lock lose updates.
const (
	stockWorkers = 4
	stockRounds  = 8
	stockInitial = 40
	stockFaults  = 12
)

func TestFaultStockScenario(t *testing.T) {
	srv := sessServer(t)
	admin := sessPool(t, srv.URL(), 4)
	if _, err := admin.Exec(tctx(t), `CREATE TABLE IF NOT EXISTS stock (k text PRIMARY KEY, n int NOT NULL, fence bigint NOT NULL DEFAULT 0);
		CREATE TABLE IF NOT EXISTS sales (id bigserial PRIMARY KEY, k text NOT NULL, buyer text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PGSTORE_FAULT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (PGSTORE_FAULT_SEED=%d reruns it)", seed, seed)
	for i, mode := range []string{"lease", "session", "rowlock", "nolock"} {
		t.Run(mode, func(t *testing.T) {
			stockRun(t, srv.Addr(), srv.URLFor, admin, mode, seed+uint64(i), mode != "nolock")
		})
	}
}

func stockRun(t *testing.T, addr string, urlFor func(string) string, admin *pgxpool.Pool, mode string, seed uint64, wantSafe bool) {
	key := t.Name()
	if _, err := admin.Exec(tctx(t), `DELETE FROM sales WHERE k = $1`, key); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(tctx(t), `INSERT INTO stock (k, n) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET n = $2, fence = 0`, key, stockInitial); err != nil {
		t.Fatal(err)
	}
	p := proxied(t, addr)
	url := urlFor(p.Addr())
	cmd := childCommand("stock", "PGSTORE_CHILD_URL="+url, "PGSTORE_CHILD_MODE="+mode, "PGSTORE_CHILD_KEY="+key)
	out := make(chan error, 1)
	var buf []byte
	go func() {
		b, err := cmd.CombinedOutput()
		buf = b
		out <- err
	}()
	stop := make(chan struct{})
	faults := make(chan int, 1)
	go func() { faults <- injectFaults(p, seed, stop) }()
	var res stockResult
	werr := stockWork(url, mode, key, "parent", &res)
	cerr := <-out
	close(stop)
	nf := <-faults
	if werr != nil || cerr != nil {
		t.Fatalf("buyers: %v; child: %v\n%s", werr, cerr, buf)
	}
	var final, sold int
	if err := admin.QueryRow(tctx(t), `SELECT n, (SELECT count(*) FROM sales WHERE k = $1) FROM stock WHERE k = $1`, key).Scan(&final, &sold); err != nil {
		t.Fatal(err)
	}
	lost := sold - (stockInitial - final)
	oversold := max(0, sold-stockInitial) + max(0, -final)
	t.Logf("%s: %d faults; parent %d sold, %d out of stock, %d errors (first: %v); total sold %d, final stock %d, lost updates %d, oversold %d; child: %s",
		mode, nf, res.sold.Load(), res.out.Load(), res.errs.Load(), res.sample.Load(), sold, final, lost, oversold, buf)
	if wantSafe && (lost != 0 || oversold != 0) {
		t.Fatalf("%s: %d lost updates, %d oversold (seed %d)", mode, lost, oversold, seed)
	}
	if wantSafe && sold == 0 {
		t.Fatalf("%s: nothing sold: the scenario did not run", mode)
	}
	if !wantSafe && lost == 0 && oversold == 0 {
		t.Fatalf("negative control: without a lock no update was lost (seed %d): the scenario cannot see violations", seed)
	}
}

// injectFaults resets every connection, or holds replies for a moment, at
// random times, at most stockFaults times, until stop. It returns how
// many it made.
func injectFaults(p *faultproxy.Proxy, seed uint64, stop chan struct{}) int {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for n := 0; n < stockFaults; n++ {
		select {
		case <-stop:
			return n
		case <-time.After(time.Duration(50+rng.IntN(250)) * time.Millisecond):
		}
		if rng.IntN(3) == 0 {
			release := p.Hold(faultproxy.Downstream)
			select {
			case <-stop:
			case <-time.After(time.Duration(50+rng.IntN(300)) * time.Millisecond):
			}
			release()
			continue
		}
		p.ResetAll()
	}
	return stockFaults
}

type stockResult struct {
	sold, out, errs atomic.Int64
	sample          atomic.Value // the first error
}

var _ = registerChild("stock", func() error {
	var res stockResult
	err := stockWork(os.Getenv("PGSTORE_CHILD_URL"), os.Getenv("PGSTORE_CHILD_MODE"), os.Getenv("PGSTORE_CHILD_KEY"), "child", &res)
	fmt.Printf("%d sold, %d out of stock, %d errors (first: %v)", res.sold.Load(), res.out.Load(), res.errs.Load(), res.sample.Load())
	return err
})

// stockWork runs the buyers of one process. Failed requests (the faults
// make some) are counted, not fatal; a request never waits more than 20 s.
func stockWork(url, mode, key, who string, res *stockResult) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url+"&pool_max_conns=10")
	if err != nil {
		return err
	}
	defer pool.Close()
	buy, closeFn, err := buyer(ctx, pool, mode, key)
	if err != nil {
		return err
	}
	defer closeFn()
	var wg sync.WaitGroup
	for w := range stockWorkers {
		wg.Go(func() {
			for r := range stockRounds {
				rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
				ok, err := buy(rctx, fmt.Sprintf("%s-%d-%d", who, w, r))
				rcancel()
				switch {
				case err != nil:
					res.errs.Add(1)
					res.sample.CompareAndSwap(nil, err.Error())
				case ok:
					res.sold.Add(1)
				default:
					res.out.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// errStale is a fenced access refused: a newer holder has claimed the
// resource.
var errStale = errors.New("stale fence")

// buyFunc sells one unit to buyer if the stock has some; it reports
// whether it sold.
type buyFunc func(ctx context.Context, buyer string) (bool, error)

// sale writes stock n-1 and records the sale, in q.
func sale(ctx context.Context, q pgx.Tx, key string, n int, buyer string) error {
	if _, err := q.Exec(ctx, `UPDATE stock SET n = $2 WHERE k = $1`, key, n-1); err != nil {
		return err
	}
	_, err := q.Exec(ctx, `INSERT INTO sales (k, buyer) VALUES ($1, $2)`, key, buyer)
	return err
}

// buyer returns the buy function of mode and what closes it.
func buyer(ctx context.Context, pool *pgxpool.Pool, mode, key string) (buyFunc, func(), error) {
	switch mode {
	case "rowlock":
		return rowBuyer(pool, key), func() {}, nil
	case "nolock":
		return func(ctx context.Context, b string) (bool, error) {
			var n int
			if err := pool.QueryRow(ctx, `SELECT n FROM stock WHERE k = $1`, key).Scan(&n); err != nil || n <= 0 {
				return false, err
			}
			time.Sleep(time.Millisecond) // the seed's think time between read and write
			return true, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return sale(ctx, tx, key, n, b) })
		}, func() {}, nil
	}
	return lockBuyer(pool, mode, key)
}

// rowBuyer buys in WithRowLock. An application retries a transaction that
// failed (the faults fail every transaction in flight); bounded: 5
// attempts.
func rowBuyer(pool *pgxpool.Pool, key string) buyFunc {
	return func(ctx context.Context, b string) (sold bool, err error) {
		for attempt := 1; attempt <= 5; attempt++ {
			sold = false
			err = pgstore.WithRowLock(ctx, pool, key, pgstore.RowLockOptions{IdleTimeout: 2 * time.Second}, func(tx pgx.Tx) error {
				var n int
				if err := tx.QueryRow(ctx, `SELECT n FROM stock WHERE k = $1`, key).Scan(&n); err != nil || n <= 0 {
					return err
				}
				sold = true
				return sale(ctx, tx, key, n, b)
			})
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(attempt) * 20 * time.Millisecond) // the retry's backoff
		}
		return sold && err == nil, err
	}
}

// lockBuyer buys under a dlock Client on the lease or session store, with
// the resource fenced: the read claims the lease's fence (a holder with an
// older one can no longer write), the write needs it.
func lockBuyer(pool *pgxpool.Pool, mode, key string) (buyFunc, func(), error) {
	var store driver.Mutex
	var err error
	if mode == "session" {
		store, err = pgstore.NewSession(pool, pgstore.SessionOptions{CheckInterval: 2 * time.Second})
	} else {
		store, err = pgstore.New(pool, pgstore.Options{SweepInterval: -1})
	}
	if err != nil {
		return nil, nil, err
	}
	c, err := dlock.New(store)
	if err != nil {
		return nil, nil, err
	}
	closeFn := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx)
		if cl, ok := store.(interface{ Close(context.Context) error }); ok {
			_ = cl.Close(cctx)
		}
	}
	return func(ctx context.Context, b string) (bool, error) {
		l, err := c.Lock(ctx, key, dlock.WithAutoRenew(2*time.Second))
		if err != nil {
			return false, err
		}
		defer func() { _ = l.Release(context.WithoutCancel(ctx)) }()
		f := int64(l.Fence())
		var n int
		err = pool.QueryRow(ctx, `UPDATE stock SET fence = $2 WHERE k = $1 AND fence <= $2 RETURNING n`, key, f).Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, errStale
		}
		if err != nil || n <= 0 {
			return false, err
		}
		time.Sleep(time.Millisecond) // the seed's think time between read and write
		sold := false
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE stock SET n = $3 WHERE k = $1 AND fence = $2`, key, f, n-1)
			if err != nil || tag.RowsAffected() == 0 {
				return errors.Join(err, errStale)
			}
			sold = true
			_, err = tx.Exec(ctx, `INSERT INTO sales (k, buyer) VALUES ($1, $2)`, key, b)
			return err
		})
		return sold && err == nil, err
	}, closeFn, nil
}
