package redlock

import (
	"context"
	"sync"
)

// flight tracks one acquisition's requests that are still in progress, per
// node. A Release (or cleanup, or re-entrant Acquire) for the same key and
// token on a node waits for that node's earlier acquire to finish first:
// Acquire returns as soon as a majority granted, and without this wait a
// request sent at once on another connection could reach a slow node before
// the acquire: a release would then leave that node locked until the TTL,
// and a re-entry would be counted there as a fresh holding.
type flight struct {
	done []chan struct{} // per node; nil for nodes not asked
	left int             // channels not yet closed, guarded by flights.mu
}

type flights struct {
	mu sync.Mutex
	m  map[string][]*flight
}

func flightKey(key, token string) string { return key + "\x00" + token }

// start registers an acquisition over nodes. It returns earlier, which
// waits until the acquisitions of key by token that started before this one
// finished on node i (so that a re-entrant acquire cannot overtake the
// first one on a slow node and be counted as a fresh holding there), and
// finished, which marks node i done for this one.
func (fs *flights) start(key, token string, n int, nodes []int) (earlier func(ctx context.Context, i int), finished func(i int)) {
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
