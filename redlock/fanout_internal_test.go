package redlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock/internal/testkit"
)

type lateReply struct {
	node, val int
	err       error
}

var errLate = errors.New("late answer")

// TestFanoutLateReply: fanout stops collecting at enough, at its timeout or
// when the caller's context ends, without waiting for a node that has not
// answered; that node's reply reaches late after fanout returned. With
// enough, the node's context stays live while its call runs; the shared
// context is cancelled once that last call returned.
func TestFanoutLateReply(t *testing.T) {
	for _, stop := range []string{"enough", "timeout", "caller ctx"} {
		t.Run(stop, func(t *testing.T) {
			p := newPool(8)
			defer p.close()
			ctx, cancelCaller := context.WithCancel(context.Background())
			defer cancelCaller()
			release := make(chan struct{})
			unblock := sync.OnceFunc(func() { close(release) })
			defer unblock() // a failed check must not leave node 0 blocked
			slowCtx := make(chan context.Context, 1)
			timeout := time.Minute
			enough := func(rs []reply[int]) bool { return rs[1].answered && rs[2].answered }
			switch stop {
			case "timeout":
				timeout, enough = 20*time.Millisecond, nil
			case "caller ctx":
				enough = nil
				go func() {
					c := <-slowCtx // node 0 is in its call
					cancelCaller()
					slowCtx <- c
				}()
			}
			lateCh := make(chan lateReply, 3)
			out := fanout(ctx, p, timeout, []int{0, 1, 2}, func(ctx context.Context, node int) (int, error) {
				if node > 0 {
					return 10 + node, nil
				}
				slowCtx <- ctx
				<-release // a node that answers late whatever its context
				return 10, errLate
			}, enough, func(node, val int, err error) { lateCh <- lateReply{node, val, err} })
			nodeCtx := <-slowCtx
			if out[0].answered || !errors.Is(out[0].err, errNoReply) {
				t.Fatalf("node 0 = %+v, want no answer", out[0])
			}
			if stop == "enough" {
				if out[1] != (reply[int]{val: 11, answered: true}) || out[2] != (reply[int]{val: 12, answered: true}) {
					t.Fatalf("nodes 1, 2 = %+v, %+v; want answers 11, 12", out[1], out[2])
				}
				if err := nodeCtx.Err(); err != nil {
					t.Fatalf("node 0's context ended (%v) while its call runs", err)
				}
			}
			unblock()
			deadline := time.After(5 * time.Second)
			for gotSlow := false; !gotSlow; {
				select {
				case r := <-lateCh: // nodes 1, 2 may be late too unless enough
					if out[r.node].answered {
						t.Fatalf("late got %+v, an answer fanout returned", r)
					}
					if gotSlow = r.node == 0; gotSlow && r != (lateReply{0, 10, errLate}) {
						t.Fatalf("late got %+v, want node 0's reply", r)
					}
				case <-deadline:
					t.Fatal("node 0's late reply never reached late")
				}
			}
			testkit.WaitFor(t, 5*time.Second, "the shared context to be cancelled", func() bool { return nodeCtx.Err() != nil })
			if stop == "enough" && nodeCtx.Err() != context.Canceled {
				t.Fatalf("shared context ended with %v, want cancelled", nodeCtx.Err())
			}
		})
	}
}
