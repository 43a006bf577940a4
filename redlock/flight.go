package redlock

import (
	"context"
	"sync"
)

// flight tracks one call's requests that are still in progress, per node:
// an acquisition's, a release's (Release and cleanup), or the handling of an
// acquisition's late replies (lateCleanup). Every call for the same key and
// token waits, per node, for the flights that started before it: calls
// return as soon as a majority answered, and without this wait a request
// sent at once on another connection could reach a slow node first. A
// release overtaking its acquire would leave that node locked until the
// TTL; a re-entry overtaking the first acquire would be counted there as a
// fresh holding; and an acquire overtaking an earlier release would find a
// hold that is about to go (the Store would count it, and then the release
// would take the new hold instead).
type flight struct {
	done []chan struct{} // per node; nil for nodes not asked
	left int             // channels not yet closed, guarded by flights.mu
}

type flights struct {
	mu sync.Mutex
	m  map[string][]*flight
}

func flightKey(key, token string) string { return key + "\x00" + token }

// start registers a call over nodes (of n). It returns earlier, which waits
// until the flights of key by token that started before this one finished
// on node i, or ctx ends (the caller then goes ahead: its own request fails
// on the same context anyway), and finished, which marks node i done for
// this one and must be called once for each of nodes.
func (fs *flights) start(key, token string, n int, nodes []int) (earlier func(ctx context.Context, i int), finished func(i int)) {
	if len(nodes) == 0 {
		return func(context.Context, int) {}, func(int) {}
	}
	f := &flight{done: make([]chan struct{}, n), left: len(nodes)}
	for _, i := range nodes {
		f.done[i] = make(chan struct{})
	}
	k := flightKey(key, token)
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = make(map[string][]*flight)
	}
	before := append([]*flight(nil), fs.m[k]...)
	fs.m[k] = append(fs.m[k], f)
	fs.mu.Unlock()
	earlier = func(ctx context.Context, i int) {
		for _, g := range before {
			if g.done[i] == nil {
				continue
			}
			select {
			case <-g.done[i]:
			case <-ctx.Done():
				return
			}
		}
	}
	return earlier, func(i int) {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		close(f.done[i])
		if f.left--; f.left > 0 {
			return
		}
		list := fs.m[k]
		for j, g := range list {
			if g == f {
				list = append(list[:j], list[j+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(fs.m, k)
		} else {
			fs.m[k] = list
		}
	}
}
