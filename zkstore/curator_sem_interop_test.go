package zkstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
)

// TestCuratorSemaphoreInterop: Curator's InterProcessSemaphoreV2 in a JVM
// and this store share the permits of one semaphore (limit 2): a Java
// lease and a dlock permit fill it, a second dlock permit is refused, a
// second Java lease waits until the dlock permit is released; a dlock
// holding of both permits keeps a Java lease waiting until it is released.
// At each step the lease nodes are counted: never more than 2, plus the
// node of a Curator acquirer that waits for room. Control: a
// store that counts only its own leases (ignoring Curator's) takes a
// permit while two Java leases are out, 3 lease nodes of 2.
func TestCuratorSemaphoreInterop(t *testing.T) {
	java, cp := curatorProgram(t)
	j := startCuratorRW(t, java, cp)
	root := uniq(t)
	s := dial(t, root, sessionTimeout, server(t).Addrs()...)
	ctx := ctxT(t, time.Minute)
	adm := admin(t)
	sem := func(key string) string { return s.SemRoot() + "/" + key }
	// within checks the lease nodes: at most the 2 permits, plus the node
	// of a Curator acquirer waiting (Curator creates its lease node, then
	// waits for room holding the semaphore's mutex).
	within := func(t *testing.T, key string, waiting int) {
		t.Helper()
		kids, _, err := adm.Children(sem(key) + "/leases")
		if err != nil || len(kids) > 2+waiting {
			t.Fatalf("lease nodes of %q: %v, %v; want at most 2 (+%d waiting)", key, kids, err, waiting)
		}
	}

	t.Run("SharedPermits", func(t *testing.T) {
		j.send(t, "l1 lease %s 2", sem("a"))
		j.expect(t, "GOT l1 lease", jvmSlack)
		a, b := tok(), tok()
		if g, err := s.AcquirePermits(ctx, "a", a, 2, 1, time.Minute); err != nil || g.Used != 2 {
			t.Fatalf("a dlock permit beside one Java lease of 2: %+v, %v; want Used 2", g, err)
		}
		var pe *driver.PermitsTakenError
		if _, err := s.AcquirePermits(ctx, "a", b, 2, 1, time.Minute); !errors.As(err, &pe) || pe.Used != 2 {
			t.Fatalf("a third permit of 2: %v, want taken with 2 out", err)
		}
		within(t, "a", 0)
		j.send(t, "l2 lease %s 2", sem("a"))
		if l, ok := j.quiet(jvmWait); !ok {
			t.Fatalf("a second Java lease said %q while the semaphore was full", l)
		}
		within(t, "a", 1)
		if _, err := s.AcquirePermits(ctx, "a", b, 2, 1, time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
			t.Fatalf("a dlock permit while a Java acquirer waits: %v, want refused", err)
		}
		if err := s.ReleasePermits(ctx, "a", a); err != nil {
			t.Fatal(err)
		}
		j.expect(t, "GOT l2 lease", jvmSlack)
		within(t, "a", 0)
		for _, id := range []string{"l1", "l2"} {
			j.send(t, "%s release", id)
			j.expect(t, "REL "+id, jvmSlack)
		}
	})

	t.Run("DlockHoldsAllPermits", func(t *testing.T) {
		a := tok()
		if _, err := s.AcquirePermits(ctx, "b", a, 2, 2, time.Minute); err != nil {
			t.Fatal(err)
		}
		j.send(t, "l3 lease %s 2", sem("b"))
		if l, ok := j.quiet(jvmWait); !ok {
			t.Fatalf("a Java lease said %q while dlock held both permits", l)
		}
		if err := s.ReleasePermits(ctx, "b", a); err != nil {
			t.Fatal(err)
		}
		j.expect(t, "GOT l3 lease", jvmSlack)
		j.send(t, "l3 release")
		j.expect(t, "REL l3", jvmSlack)
	})

	for _, ownOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("JavaFull/ownOnly=%v", ownOnly), func(t *testing.T) {
			key := fmt.Sprintf("c%v", ownOnly)
			zkstore.SetSemOwnOnly(s, ownOnly)
			t.Cleanup(func() { zkstore.SetSemOwnOnly(s, false) })
			for _, id := range []string{"m1", "m2"} {
				j.send(t, "%s%v lease %s 2", id, ownOnly, sem(key))
				j.expect(t, fmt.Sprintf("GOT %s%v lease", id, ownOnly), jvmSlack)
			}
			a := tok()
			_, err := s.AcquirePermits(ctx, key, a, 2, 1, time.Minute)
			kids, _, _ := adm.Children(sem(key) + "/leases")
			t.Logf("ownOnly=%v: a dlock permit while 2 Java leases of 2 are out: %v; %d lease nodes", ownOnly, err, len(kids))
			if over := len(kids) > 2; over != ownOnly || (err == nil) != ownOnly {
				t.Fatalf("ownOnly=%v: %d lease nodes of 2 (err %v); want over the limit only in the control", ownOnly, len(kids), err)
			}
			if err == nil {
				if err := s.ReleasePermits(ctx, key, a); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"m1", "m2"} {
				j.send(t, "%s%v release", id, ownOnly)
				j.expect(t, fmt.Sprintf("REL %s%v", id, ownOnly), jvmSlack)
			}
		})
	}
}
