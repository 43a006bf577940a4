package zkstore

import (
	"context"
	"errors"
	"sync"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// The read-write lock's and the semaphore's extends and releases find the
// token's holding alike: the one this store recorded, else one found by
// the token's digest in the nodes' data (held through another session).

// heldHere is the holding an extension renews: h if this store recorded it
// (ok); else errOtherSession(key) if foreign finds one held through another
// session, driver.NotHeld(false) if it finds none, or foreign's error.
func heldHere[H any](key string, h *H, ok bool, foreign func() (*H, error)) (*H, error) {
	if ok {
		return h, nil
	}
	f, err := foreign()
	switch {
	case err != nil:
		return nil, err
	case f != nil:
		return nil, errOtherSession(key)
	}
	return nil, driver.NotHeld(false)
}

// heldAnywhere is the holding a release deletes: h if this store recorded
// it (ok), else the one foreign finds through another session;
// driver.NotHeld(false) if there is none, or foreign's error.
func heldAnywhere[H any](h *H, ok bool, foreign func() (*H, error)) (*H, error) {
	if ok {
		return h, nil
	}
	f, err := foreign()
	if err == nil && f == nil {
		err = driver.NotHeld(false)
	}
	return f, err
}

// goneIsNotHeld is a confirmation's error as an extension returns it:
// errGone (a node of the holding is missing) is driver.NotHeld(false).
func goneIsNotHeld(err error) error {
	if errors.Is(err, errGone) {
		return driver.NotHeld(false)
	}
	return err
}

// checkRelease is a release's check before any I/O: the key, the store's
// rule for the primitive's keys (check), then ctx.
func checkRelease(ctx context.Context, key string, check func(string) error) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	if err := check(key); err != nil {
		return err
	}
	return ctx.Err()
}

// readNodes reads the nodes dir/name of names, all at once, and calls
// visit (one call at a time) with each one's name, data and stat; a node
// gone meanwhile is skipped. It returns the errors of the other failed
// reads, joined.
func (s *Store) readNodes(ctx context.Context, dir string, names []string, visit func(name string, data []byte, st *zk.Stat)) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			data, st, err := s.get(ctx, dir+"/"+n)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				visit(n, data, st)
			case !errors.Is(err, zk.ErrNoNode):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// get reads the node at path: one request (see read).
func (s *Store) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	var data []byte
	var st *zk.Stat
	err := s.read(ctx, func() error {
		var e error
		data, st, e = s.conn.Get(path)
		return e
	})
	return data, st, err
}
