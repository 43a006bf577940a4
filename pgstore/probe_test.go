package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// probesUntil reads conn's notifications until the payload end and counts
// the listeners' probes (payloads starting "dlock-probe-") among them.
func probesUntil(t *testing.T, conn *pgx.Conn, end string) int {
	t.Helper()
	c, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	n := 0
	for {
		note, err := conn.WaitForNotification(c)
		if err != nil {
			t.Fatalf("waiting for %q: %v", end, err)
		}
		switch {
		case note.Payload == end:
			return n
		case strings.HasPrefix(note.Payload, "dlock-probe-"):
			n++
		}
	}
}

// TestProbeOncePerConnection: on a direct connection the listener's probe
// NOTIFY is sent once per listening connection, not per Subscribe: 20
// subscriptions on one connection send one probe (a raw LISTEN on the
// store's channel counts them), and a reconnection (the listener's backend
// terminated) sends one more. It also logs what the probe adds to a
// store's first Subscribe (connect, LISTEN, probe), measured against stores
// without it, interleaved: later Subscribes pay nothing for it.
func TestProbeOncePerConnection(t *testing.T) {
	admin := newPool(t)
	s := newStore(t, newPool(t), pgstore.Options{})
	raw := listen(t, s.Table())
	channel := s.Table() + "_locks"
	for i := range 20 {
		_, cancel, err := s.Subscribe(ctx(t), fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	notify := func(payload string) {
		if _, err := admin.Exec(ctx(t), "SELECT pg_notify($1, $2)", channel, payload); err != nil {
			t.Fatal(err)
		}
	}
	notify("end1")
	if n := probesUntil(t, raw, "end1"); n != 1 {
		t.Fatalf("20 Subscribes on one listening connection sent %d probes; want 1", n)
	}
	// The store's listening backend: the one that ran its LISTEN, not raw's.
	storeListener := func() int {
		var pid int
		err := admin.QueryRow(ctx(t), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE query = $1 AND pid <> $2`,
			`LISTEN "`+channel+`"`, int(raw.PgConn().PID())).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	pid := storeListener()
	if pid == 0 {
		t.Fatal("no backend runs the store's LISTEN")
	}
	if _, err := admin.Exec(ctx(t), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); storeListener() == pid || storeListener() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not reconnect within 10s")
		}
		time.Sleep(20 * time.Millisecond) // polling the reconnection, with a deadline
	}
	// The new connection runs LISTEN before its probe: a Subscribe returns
	// once the probe has arrived.
	_, cancel, err := s.Subscribe(ctx(t), "k")
	if err != nil {
		t.Fatalf("Subscribe after the listener's backend was terminated: %v", err)
	}
	cancel()
	notify("end2")
	if n := probesUntil(t, raw, "end2"); n != 1 {
		t.Fatalf("a reconnection sent %d probes; want 1", n)
	}
	firstSubscribe(t)
}

// firstSubscribe logs the median first Subscribe of new stores with and
// without the probe, interleaved, and fails if the probe adds more than
// 100 ms (a direct connection answers in about a millisecond).
func firstSubscribe(t *testing.T) {
	pool := newPool(t)
	table := uniqTable(t, pool)
	var with, without []time.Duration
	for i := range 10 {
		s := newStore(t, pool, pgstore.Options{Table: table})
		probe := i%2 == 0
		if !probe {
			pgstore.WithoutProbe(s)
		}
		start := time.Now()
		_, cancel, err := s.Subscribe(ctx(t), "k")
		d := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if probe {
			with = append(with, d)
		} else {
			without = append(without, d)
		}
	}
	slices.Sort(with)
	slices.Sort(without)
	mw, mo := with[len(with)/2], without[len(without)/2]
	t.Logf("a store's first Subscribe (connect, LISTEN, mark), median of 5 each, interleaved: %v with the probe, %v without", mw, mo)
	if mw-mo > 100*time.Millisecond {
		t.Fatalf("the probe adds %v to a first Subscribe on a direct connection; want well under 100ms", mw-mo)
	}
}

// releaseNote returns conn's next notification that is not a listener's
// probe (payload "dlock-probe-…", sent once per listening connection).
func releaseNote(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil || !strings.HasPrefix(note.Payload, "dlock-probe-") {
			return note, err
		}
	}
}
