package redlock

import (
	"context"
	"sync"
)

// flight tracks one acquisition's requests that are still in progress, per
// node. A Release (or cleanup) for the same key and token on a node waits
// for that node's acquire to finish first: Acquire returns as soon as a
// majority granted, and without this wait a release sent at once on another
// connection could reach a slow node before the acquire it is meant to undo,
// leaving that node locked until the TTL.
type flight struct {
	done []chan struct{} // per node; nil for nodes not asked
	left int             // channels not yet closed, guarded by flights.mu
}

type flights struct {
	mu sync.Mutex
	m  map[string][]*flight
}

func flightKey(key, token string) string { return key + "\x00" + token }

// start registers an acquisition over nodes and returns a function that
// marks node i finished.
func (fs *flights) start(key, token string, n int, nodes []int) func(i int) {
	f := &flight{done: make([]chan struct{}, n), left: len(nodes)}
	for _, i := range nodes {
		f.done[i] = make(chan struct{})
	}
	k := flightKey(key, token)
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = make(map[string][]*flight)
	}
	fs.m[k] = append(fs.m[k], f)
	fs.mu.Unlock()
	return func(i int) {
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

// wait blocks until no acquisition of key by token is in progress on node
// i, or ctx ends (the caller then goes ahead: its own call fails on the same
// context anyway).
func (fs *flights) wait(ctx context.Context, key, token string, i int) {
	fs.mu.Lock()
	var chans []chan struct{}
	for _, f := range fs.m[flightKey(key, token)] {
		if f.done[i] != nil {
			chans = append(chans, f.done[i])
		}
	}
	fs.mu.Unlock()
	for _, ch := range chans {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}
