package inventory

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// Embedded is an in-process Redis-protocol server (miniredis) on a loopback
// port, so that the demo runs with nothing installed but Go. It runs Lua
// (gopher-lua) and pub/sub; keys expire on the wall clock.
//
// It is a stand-in for a demo, not a Redis: no persistence, no replication,
// single-threaded scripts only in the sense miniredis gives.
type Embedded struct {
	m *miniredis.Miniredis
}

// StartEmbedded starts the embedded server on 127.0.0.1 and a free port. It
// returns an error if no port could be bound.
func StartEmbedded() (*Embedded, error) {
	m := miniredis.NewMiniRedis()
	// miniredis only expires keys on FastForward by default; leases must
	// expire on their own for the crash and slow-holder scenarios.
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("inventory: start embedded redis: %w", err)
	}
	return &Embedded{m: m}, nil
}

// Addr returns host:port of the server.
func (e *Embedded) Addr() string { return e.m.Addr() }

// URL returns redis://host:port for --redis flags.
func (e *Embedded) URL() string { return "redis://" + e.m.Addr() }

// Close stops the server and drops its data.
func (e *Embedded) Close() { e.m.Close() }
