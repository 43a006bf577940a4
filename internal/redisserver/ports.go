package redisserver

import (
	"fmt"
	"sync"

	"example.com/dlock/internal/proc"
)

// reserved holds the ports of live Servers of this process, so that a new
// server never picks a port a stopped server will want back on Restart.
var reserved = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// reservePort asks the kernel for a free loopback port (listen on
// 127.0.0.1:0, then close) that no Server of this process holds, and
// reserves it. The port may still be taken by another process before
// redis-server binds it; callers retry on errAddrInUse.
func reservePort() (int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	for range 100 {
		port, err := proc.FreePort()
		if err != nil {
			return 0, fmt.Errorf("redisserver: pick free port: %w", err)
		}
		if !reserved.ports[port] {
			reserved.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("redisserver: pick free port: only reserved ports offered")
}

// releasePorts forgets reservations; zero ports are ignored.
func releasePorts(ports ...int) {
	reserved.Lock()
	defer reserved.Unlock()
	for _, p := range ports {
		delete(reserved.ports, p)
	}
}
