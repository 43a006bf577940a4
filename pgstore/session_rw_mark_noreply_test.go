package pgstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/pgstore"
)

// TestRWMarkReleaseNoReply: a writer-waiting mark whose release gets no
// reply (the proxy swallows every reply) is freed on the server all the
// same: the store closes the mark's connection, after the unanswered
// statement gave it up rather than under it (go test -race found the
// close racing the statement's read on pgx's connection before). The
// check: an exclusive lock on RWMarkID, which any mark left behind keeps
// out, is granted within the bound.
func TestRWMarkReleaseNoReply(t *testing.T) {
	srv := sessServer(t)
	p := proxied(t, srv.Addr())
	w := newSession(t, sessPool(t, srv.URLFor(p.Addr()), 4), pgstore.SessionOptions{CheckInterval: pgstore.MinCheckInterval})
	r := newSession(t, sessPool(t, srv.URL(), 2), pgstore.SessionOptions{})
	key := "rw-mark-noreply-" + tok()[:8]
	if _, err := r.AcquireRead(ctx(t), key, tok(), time.Minute); err != nil {
		t.Fatal(err)
	}
	wantRWRefused(t, w, key, driver.RWWrite) // leaves w's mark
	p.Blackhole(faultproxy.Downstream, true)

	// The mark expires after driver.WriterWaitTTL; its release waits one
	// check interval for a reply, then the connection is closed. 20s is
	// slack for a loaded machine over the ~2.5s this takes.
	admin := plainConn(t, srv.URL())
	lctx, cancel := context.WithTimeout(ctx(t), 30*time.Second)
	defer cancel()
	if _, err := admin.Exec(lctx, `SET lock_timeout = '20s'`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	plainExec(t, admin, `SELECT pg_advisory_lock($1)`, pgstore.RWMarkID("dlock", key))
	t.Logf("mark freed %v after the replies stopped", time.Since(start).Round(time.Millisecond))
	plainExec(t, admin, `SELECT pg_advisory_unlock($1)`, pgstore.RWMarkID("dlock", key))
	p.Blackhole(faultproxy.Downstream, false)
}
