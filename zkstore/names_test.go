package zkstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
)

// TestNestedNamesAreIndependent (issue 23): while a nested name whose last
// part contains "lock-" is held, the name before it is free for another
// session, and List reports both; a nested name whose part is named like a
// lock node ("lock-" and a 10-digit sequence at its end) is refused with
// driver.ErrInvalid before any request, by every call. On a real
// ZooKeeper. Negative control: the old rule (every child with "lock-" is a
// participant, no name refused) must show the bug: n1 refused while the
// nested name is held; the control fails the test if it does not.
func TestNestedNamesAreIndependent(t *testing.T) {
	addrs := server(t).Addrs()
	for _, loose := range []bool{false, true} {
		t.Run(fmt.Sprintf("loose=%v", loose), func(t *testing.T) {
			root := uniq(t)
			a, b := dial(t, root, 10*time.Second, addrs...), dial(t, root, 10*time.Second, addrs...)
			zkstore.SetLooseNames(a, loose)
			zkstore.SetLooseNames(b, loose)
			ctx := ctxT(t, 30*time.Second)
			nested := []string{"n1/x-lock-1", "n1/lock-free", "n1/x-lock-00000000001", "n1/xlock-+000000001"}
			if loose {
				nested = append(nested, "n1/x-lock-0000000001")
			}
			blocked := 0
			for _, k := range nested {
				if independent(t, ctx, a, b, k) {
					continue
				}
				if !loose {
					t.Errorf("while %q is held, n1 is refused to another session", k)
				}
				blocked++
			}
			if loose {
				if blocked == 0 {
					t.Fatal("negative control: the old rule let n1 be taken while every nested name was held; the test cannot see the bug")
				}
				t.Logf("control: the old rule refused n1 while %d of %d nested names were held", blocked, len(nested))
				return
			}
			refused(t, ctx, a)
		})
	}
}

// independent holds k through a, then takes "n1" through b, and lists
// both; it reports whether b got n1, releasing what it took.
func independent(t *testing.T, ctx context.Context, a, b *zkstore.Store, k string) bool {
	t.Helper()
	ta, tb := tok(), tok()
	if _, err := a.Acquire(ctx, k, ta, time.Minute); err != nil {
		t.Fatalf("acquire %q: %v", k, err)
	}
	defer func() {
		if err := a.Release(ctx, k, ta); err != nil {
			t.Fatalf("release %q: %v", k, err)
		}
	}()
	_, err := b.Acquire(ctx, "n1", tb, time.Minute)
	if errors.Is(err, driver.ErrNotAcquired) {
		return false
	}
	if err != nil {
		t.Fatalf("acquire n1 while %q is held: %v", k, err)
	}
	held := map[string]bool{}
	if err := b.List(ctx, "", func(key string, info driver.Info) bool { held[key] = info.Held; return true }); err != nil {
		t.Fatal(err)
	}
	if !held["n1"] || !held[k] {
		t.Errorf("List while n1 and %q are held: %v", k, held)
	}
	if err := b.Release(ctx, "n1", tb); err != nil {
		t.Fatal(err)
	}
	return true
}

// refused checks that every call of s refuses names with a part after the
// first named like a lock node, with ErrInvalid and without a request.
func refused(t *testing.T, ctx context.Context, s *zkstore.Store) {
	t.Helper()
	names := []string{"n1/x-lock-0000000001", "a/_c_0c4f6a5e-8d3b-4c1e-9a2f-1b2c3d4e5f60-lock-0000000007/b", "a/lock--000000001", "a/lock--2147483648", "a/b/c-lock-2147483647"}
	for _, k := range names {
		before := zkstore.Requests(s)
		_, e1 := s.Acquire(ctx, k, "t", time.Minute)
		_, e2 := s.AcquireQueued(ctx, k, "t", time.Minute)
		e3 := s.Release(ctx, k, "t")
		_, e4 := s.Extend(ctx, k, "t", time.Minute)
		_, e5 := s.Transfer(ctx, k, "t", "u", time.Minute)
		_, e6 := s.Inspect(ctx, k)
		_, e7 := s.Waiters(ctx, k)
		for i, err := range []error{e1, e2, e3, e4, e5, e6, e7} {
			if !errors.Is(err, driver.ErrInvalid) {
				t.Errorf("%q, call %d: %v, want ErrInvalid", k, i+1, err)
			}
		}
		if n := zkstore.Requests(s) - before; n != 0 {
			t.Errorf("%q: %d requests sent for refused names", k, n)
		}
	}
	t.Logf("refused %v: %v", names[0], func() error { _, err := s.Acquire(ctx, names[0], "t", time.Minute); return err }())
}
