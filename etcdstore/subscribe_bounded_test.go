package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
)

// TestSubscribeEndsWithItsContext: SubscribeRW and SubscribePermits on a
// connection that answers nothing (every reply dropped) return by their
// context's end plus a second, with an error; before, the watch they set
// up waited for the stuck stream with a context that never ended, and the
// waiting Lock or Acquire hung past its own deadline (the chaos suite's
// read-write traffic on etcd hung for minutes). Without the fix in
// subscribe both calls are still blocked a second after their context.
func TestSubscribeEndsWithItsContext(t *testing.T) {
	s, p := proxiedStore(t, node(t), uniq(t), 5*time.Second)
	p.Blackhole(faultproxy.Downstream, true)
	for _, sub := range []struct {
		name string
		call func(ctx context.Context) (<-chan struct{}, func(), error)
	}{
		{"SubscribeRW", func(ctx context.Context) (<-chan struct{}, func(), error) { return s.SubscribeRW(ctx, "k") }},
		{"SubscribePermits", func(ctx context.Context) (<-chan struct{}, func(), error) { return s.SubscribePermits(ctx, "k") }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, stop, err := sub.call(ctx)
			if err == nil {
				stop()
			}
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("%s returned after %v: %v", sub.name, time.Since(start), err)
			if err == nil {
				t.Errorf("%s succeeded on a connection that answers nothing", sub.name)
			}
		case <-time.After(300*time.Millisecond + time.Second):
			t.Errorf("%s still blocked %v after its context's 300 ms ended", sub.name, time.Since(start))
		}
		cancel()
	}
}
