package zkstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
)

// TestDowngradeKeepsQueuedWriterOut is CURATOR-621's schedule: a writer
// holds, a second writer queues behind it, the first downgrades to read.
// The queued writer must stay out while the downgraded reader reads, and
// get in once it leaves. The control downgrades as Curator 5.4 does (the
// reader's node gets a new sequence, after the queued writer's), and the
// queued writer then gets in beside the reader: an overlap.
func TestDowngradeKeepsQueuedWriterOut(t *testing.T) {
	for _, c := range []struct {
		name    string
		seq     bool
		overlap bool
	}{{"store", false, false}, {"curator-5.4-downgrade(control)", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			root := uniq(t)
			a, b := dial(t, root, sessionTimeout, server(t).Addrs()...), dial(t, root, sessionTimeout, server(t).Addrs()...)
			zkstore.SetSequentialDowngrade(a, c.seq)
			ctx := ctxT(t, 20*time.Second)
			w, x := tok(), tok()
			gw, err := a.AcquireWrite(ctx, "k", w, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.AcquireWrite(ctx, "k", x, time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
				t.Fatalf("the second writer while the first holds: %v, want ErrNotAcquired (queued)", err)
			}
			gd, err := a.AcquireRead(ctx, "k", w, time.Minute)
			if err != nil || gd.Mode != driver.RWRead || gd.Fence != gw.Fence {
				t.Fatalf("downgrade = %+v, %v; want read with fence %d", gd, err, gw.Fence)
			}
			_, err = b.AcquireWrite(ctx, "k", x, time.Minute)
			if overlap := err == nil; overlap != c.overlap {
				t.Fatalf("the queued writer's retry after the downgrade: %v (overlap %v, want %v)", err, overlap, c.overlap)
			}
			if c.overlap {
				return
			}
			if !errors.Is(err, driver.ErrNotAcquired) {
				t.Fatalf("the queued writer's retry: %v, want ErrNotAcquired", err)
			}
			if err := a.ReleaseRW(ctx, "k", w); err != nil {
				t.Fatal(err)
			}
			gx, err := b.AcquireWrite(ctx, "k", x, time.Minute)
			if err != nil || gx.Fence <= gw.Fence {
				t.Fatalf("the queued writer once the reader left: %+v, %v; want a grant with a fence above %d", gx, err, gw.Fence)
			}
		})
	}
}
