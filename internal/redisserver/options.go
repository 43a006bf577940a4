package redisserver

import (
	"path/filepath"
	"strconv"
)

// Option configures a Server started by Start, StartProcess, StartN or
// StartCluster. Options are applied in order.
type Option func(*config)

// config is the launch configuration of a server. It is kept unchanged for
// the lifetime of the Server so that Restart reproduces the same process.
type config struct {
	aof         bool
	fsyncAlways bool
	extra       []string

	// clusterBus makes the server allocate a second free port for the
	// cluster bus (--cluster-port) instead of relying on port+10000, which
	// may lie above 65535 for ports from the ephemeral range.
	clusterBus bool
}

// WithAOF enables the append-only file (--appendonly yes). With
// fsyncAlways the AOF is fsynced after every write (--appendfsync always), so
// every acknowledged write survives a Kill followed by Restart; otherwise it
// is fsynced once per second (--appendfsync everysec).
func WithAOF(fsyncAlways bool) Option {
	return func(c *config) {
		c.aof = true
		c.fsyncAlways = fsyncAlways
	}
}

// WithArgs appends raw redis-server command-line arguments, for example
// WithArgs("--maxmemory-policy", "allkeys-lru") or
// WithArgs("--enable-debug-command", "local"). They come after the defaults
// and so override them. Invalid arguments make the server fail to start; the
// error then contains the tail of its log.
func WithArgs(extra ...string) Option {
	return func(c *config) {
		c.extra = append(c.extra, extra...)
	}
}

// withCluster configures a cluster-enabled node.
func withCluster() Option {
	return func(c *config) {
		c.clusterBus = true
		c.extra = append(c.extra,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
	}
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}

const (
	logName    = "redis.log"
	stderrName = "stderr.log"
)

// args returns the redis-server arguments for the server's current ports.
func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, logName),
		"--save", "",
		"--appendonly", "no",
	}
	if s.cfg.aof {
		fsync := "everysec"
		if s.cfg.fsyncAlways {
			fsync = "always"
		}
		a = append(a, "--appendonly", "yes", "--appendfsync", fsync)
	}
	if s.cfg.clusterBus {
		a = append(a, "--cluster-port", strconv.Itoa(s.busPort))
	}
	return append(a, s.cfg.extra...)
}
