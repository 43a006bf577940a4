package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/redisstore"
)

// The seed articles' scenario: ProductStock_10000 starts at 100 and 100
// concurrent requests, served by two separate OS processes (re-executions of
// this test binary), each lock → read → if > 0 write stock-1 → unlock.

const (
	childEnv  = "DLOCK_STOCK_CHILD" // "lock", "lockread" or "nolock"
	addrEnv   = "DLOCK_STOCK_ADDR"
	countEnv  = "DLOCK_STOCK_REQUESTS"
	stockKey  = "ProductStock_10000"
	occupancy = "stock:occupancy"
)

type stockResult struct {
	Sold, SoldOut, Failed, Overlaps int
	Errors                          []string
}

func runChild() int {
	n, _ := strconv.Atoi(os.Getenv(countEnv))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(addrEnv), PoolSize: 64})
	defer rdb.Close()
	store, _ := redisstore.New(rdb, nil)
	defer store.Close()
	locks, _ := dlock.New(store)
	defer locks.Close(context.Background())
	mode := os.Getenv(childEnv)
	var mu sync.Mutex
	var res stockResult
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			outcome, err := buy(ctx, rdb, locks, mode)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				res.Failed++
				res.Errors = append(res.Errors, err.Error())
			case outcome == "overlap":
				res.Overlaps++
				res.Sold++
			case outcome == "sold":
				res.Sold++
			default:
				res.SoldOut++
			}
		}()
	}
	wg.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// buy is one request of the inventory service.
// In mode "lockread" the stock is read with the grant (WithRead), not by GET.
func buy(ctx context.Context, rdb *redis.Client, locks *dlock.Client, mode string) (string, error) {
	var outcome string
	read := func(ctx context.Context) (int, error) { return rdb.Get(ctx, stockKey).Int() }
	section := func(ctx context.Context) error {
		in, err := rdb.Incr(ctx, occupancy).Result()
		if err != nil {
			return err
		}
		defer rdb.Decr(context.WithoutCancel(ctx), occupancy)
		stock, err := read(ctx)
		if err != nil {
			return err
		}
		if stock <= 0 {
			outcome = "soldout"
			return nil
		}
		time.Sleep(time.Millisecond) // the service's own work between read and write
		if err := rdb.Set(ctx, stockKey, stock-1, 0).Err(); err != nil {
			return err
		}
		outcome = "sold"
		if in > 1 {
			outcome = "overlap"
		}
		return nil
	}
	switch mode {
	case "nolock":
		return outcome, section(ctx)
	case "lockread":
		l, err := locks.Lock(ctx, stockKey, dlock.WithRead(stockKey))
		if err != nil {
			return "", err
		}
		read = func(context.Context) (int, error) {
			v, found := l.Value()
			if !l.ValueRead() || !found {
				return 0, fmt.Errorf("stock not read with the grant (%q, %v)", v, found)
			}
			return strconv.Atoi(v)
		}
		err = section(ctx)
		return outcome, errors.Join(err, l.Release(context.WithoutCancel(ctx)))
	}
	return outcome, locks.Do(ctx, stockKey, section)
}

func runStock(t *testing.T, mode string, procs, perProc int) (stockResult, int) {
	t.Helper()
	srv, rdb := newRedis(t)
	ctx := testCtx(t)
	if err := rdb.Set(ctx, stockKey, 100, 0).Err(); err != nil {
		t.Fatal(err)
	}
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for p := 0; p < procs; p++ {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+mode, addrEnv+"="+srv.Addr(), fmt.Sprintf("%s=%d", countEnv, perProc))
		cmd.Stderr = os.Stderr
		wg.Add(1)
		go func() { defer wg.Done(); outs[p], errs[p] = cmd.Output() }()
	}
	wg.Wait()
	var total stockResult
	for p := range outs {
		var r stockResult
		if errs[p] != nil || json.Unmarshal(outs[p], &r) != nil {
			t.Fatalf("process %d: %v, output %q", p, errs[p], outs[p])
		}
		total.Sold += r.Sold
		total.SoldOut += r.SoldOut
		total.Failed += r.Failed
		total.Overlaps += r.Overlaps
		total.Errors = append(total.Errors, r.Errors...)
	}
	final, err := rdb.Get(ctx, stockKey).Int()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %+v, final stock %d, lost updates %d", mode, total, final, total.Sold-(100-final))
	return total, final
}

func TestSeedStockScenarioTwoProcesses(t *testing.T) {
	res, final := runStock(t, "lock", 2, 50)
	if res.Sold != 100 || res.Failed != 0 || res.SoldOut != 0 || final != 0 || res.Overlaps != 0 {
		t.Fatalf("with dlock: %+v, final stock %d; want 100 sold, 0 failed, final 0, no overlap", res, final)
	}
}

func TestSeedStockScenarioWithoutLockLosesUpdates(t *testing.T) {
	res, final := runStock(t, "nolock", 2, 50)
	if lost := res.Sold - (100 - final); lost <= 0 {
		t.Fatalf("no lost update without a lock (%+v, final %d): the scenario cannot tell a lock from none", res, final)
	}
}

func TestSeedStockScenarioTwoProcessesWithRead(t *testing.T) {
	res, final := runStock(t, "lockread", 2, 50)
	if res.Sold != 100 || res.Failed != 0 || res.SoldOut != 0 || final != 0 || res.Overlaps != 0 {
		t.Fatalf("with dlock and WithRead: %+v, final stock %d; want 100 sold, 0 failed, final 0, no overlap", res, final)
	}
}
