package chaos_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
)

// childCommit takes the lock (renewed automatically) reading the stock with
// the grant (WithRead), says HELD, and when told to on stdin sells one:
// with Lease.Commit (MODE=commit) or with a plain SET and Release (the
// negative control). It says SOLD or REFUSED.
func childCommit(ctx context.Context, locks *dlock.Client, rdb *redis.Client) int {
	l, err := locks.Lock(ctx, env("LOCK"), dlock.WithAutoRenew(envDur("TTL")), dlock.WithRead(env("RES")))
	if err != nil || !l.ValueRead() {
		fmt.Fprintln(os.Stderr, "commit: lock:", err)
		return 1
	}
	v, _ := l.Value()
	stock, _ := strconv.Atoi(v)
	fmt.Println("HELD")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 1
	}
	if env("MODE") == "commit" {
		err = l.Commit(ctx, strconv.Itoa(stock-1))
	} else if err = rdb.Set(ctx, env("RES"), stock-1, 0).Err(); err == nil {
		_ = l.Release(ctx) // the write landed whatever Release says
	}
	if err != nil {
		fmt.Println("REFUSED", err)
		return 0
	}
	fmt.Println("SOLD")
	return 0
}

// pausedCommit: a holder that read the stock (10) with its grant is
// SIGSTOPped for 3×TTL; a second client takes the lock and sells one with
// Commit; the holder resumes and sells with mode. It returns the sales that
// reported success and the final stock.
func pausedCommit(t *testing.T, mode string) (sales int, final int, holderSaid string) {
	ttl := 400 * time.Millisecond
	srv, rdb := newRedis(t)
	ctx := testCtx(t, time.Minute)
	res := "stock:{" + lockKey + "}"
	if err := rdb.Set(ctx, res, 10, 0).Err(); err != nil {
		t.Fatal(err)
	}
	holder := spawn(t, "commit", map[string]string{"LOCK_ADDR": srv.Addr(), "RES_ADDR": srv.Addr(),
		"LOCK": lockKey, "RES": res, "TTL": ttl.String(), "MODE": mode})
	if l := holder.line(t, 20*time.Second); l != "HELD" {
		t.Fatalf("holder said %q", l)
	}
	holder.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	a := newApp(t, nil, 2, rdb, nil, nil)
	l, err := a.locks.Lock(ctx, lockKey, dlock.WithTTL(ttl), dlock.WithWait(ttl+drift(ttl)+slack), dlock.WithRead(res))
	if err != nil {
		t.Fatalf("second client: lock not free within TTL+drift+slack of the holder's pause: %v", err)
	}
	v, _ := l.Value()
	n, _ := strconv.Atoi(v)
	if err := l.Commit(ctx, strconv.Itoa(n-1)); err != nil {
		t.Fatal(err)
	}
	sales = 1
	time.Sleep(time.Until(stopped.Add(3 * ttl))) // the pause under test
	holder.signal(t, syscall.SIGCONT)
	if _, err := holder.stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	holderSaid = holder.line(t, 20*time.Second)
	if holderSaid == "SOLD" {
		sales++
	}
	final, err = rdb.Get(ctx, res).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	t.Logf("RESULT paused-commit mode=%s sales=%d final=%d holder=%q", mode, sales, final, holderSaid)
	return sales, final, holderSaid
}

// R5 with Lease.Commit: the paused holder's sale is refused (ErrLost) and
// nothing it wrote lands, so stock = 10 − sales.
func TestPausedHolderCommitRefused(t *testing.T) {
	sales, final, said := pausedCommit(t, "commit")
	if sales != 1 || final != 9 {
		t.Fatalf("%d sales, final stock %d (holder said %q): want 1 sale and 9", sales, final, said)
	}
}

// Negative control: the same pause with a plain SET before Release sells
// twice from one unit of stock (a lost update: 2 sales, stock 9).
func TestPausedHolderNegativeControlPlainWrite(t *testing.T) {
	sales, final, said := pausedCommit(t, "plain")
	if sales+final == 10 {
		t.Fatalf("%d sales, final stock %d (holder said %q): the stale write was not detected", sales, final, said)
	}
}
