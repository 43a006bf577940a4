package zkstore_test

import (
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestRWKilledReaderFreesTheWriter: a reader whose process dies (its
// requests blackholed, its conn closed: the server expires its session
// after the timeout) keeps a queued writer out no longer than its own
// session timeout (plus slack), while another reader, whose session
// lives, holds on: the writer then gets in as soon as that one leaves.
// The writer must not get in before the dead reader's session ended.
func TestRWKilledReaderFreesTheWriter(t *testing.T) {
	root := uniq(t)
	addr := server(t).Addrs()[0]
	dead, live, w := dialProxied(t, root, sessionTimeout, addr), dial(t, root, sessionTimeout, addr), dial(t, root, sessionTimeout, addr)
	ctx := ctxT(t, time.Minute)
	lr := tok()
	if _, err := dead.AcquireRead(ctx, "k", tok(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := live.AcquireRead(ctx, "k", lr, time.Minute); err != nil {
		t.Fatal(err)
	}
	q := startQueued(t, w, "k", driver.RWWrite)
	queuedOnKey(t, live, "k", 3)
	killed := time.Now()
	dead.crash()
	kids := admin(t)
	deadline := killed.Add(sessionTimeout + 5*time.Second)
	for {
		n, _, err := kids.Children(live.RWRoot() + "/k")
		if err == nil && len(n) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead reader's node still there %v after its process died (session timeout %v): %v %v", time.Since(killed), sessionTimeout, n, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the server with a deadline
	}
	t.Logf("the dead reader's node went %v after its process died (session timeout %v)", time.Since(killed).Round(time.Millisecond), sessionTimeout)
	q.waiting(t, "the writer while the live reader reads")
	mustRelease(t, live, "k", lr)
	q.granted(t, "the writer once the live reader left")
}
