package redisserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Option configures a Server started by Start, StartProcess, StartN,
// StartCluster or StartSentinel. Options are applied in order.
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

	// sentinelOf, when non-zero, turns the process into a sentinel that
	// monitors the primary listening on 127.0.0.1:sentinelOf.
	sentinelOf int
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

// withSentinel configures a sentinel monitoring 127.0.0.1:primaryPort.
func withSentinel(primaryPort int) Option {
	return func(c *config) { c.sentinelOf = primaryPort }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}

const (
	logName      = "redis.log"
	stderrName   = "stderr.log"
	sentinelConf = "sentinel.conf"
	sentinelName = "mymaster"
)

// args returns the redis-server arguments for the server's current ports.
// For a sentinel it (re)writes the configuration file when writeConf is
// true; on Restart the file sentinel rewrote itself is kept.
func (s *Server) args(writeConf bool) ([]string, error) {
	if s.cfg.sentinelOf != 0 {
		return s.sentinelArgs(writeConf)
	}
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, logName),
		"--save", "",
		"--appendonly", "no",
		// Start full syncs at once instead of waiting 5 s for more replicas.
		"--repl-diskless-sync-delay", "0",
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
	return append(a, s.cfg.extra...), nil
}

// sentinelArgs writes sentinel.conf into the server directory (sentinel
// needs a writable configuration file it can rewrite) and returns the
// arguments that start redis-server in sentinel mode.
func (s *Server) sentinelArgs(writeConf bool) ([]string, error) {
	path := filepath.Join(s.dir, sentinelConf)
	if writeConf {
		conf := fmt.Sprintf("port %d\n"+
			"bind 127.0.0.1\n"+
			"protected-mode no\n"+
			"daemonize no\n"+
			"dir %q\n"+
			"logfile %q\n"+
			"sentinel resolve-hostnames no\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 3000\n",
			s.port, s.dir, filepath.Join(s.dir, logName),
			sentinelName, s.cfg.sentinelOf, sentinelName, sentinelName)
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, fmt.Errorf("redisserver: write %s: %w", path, err)
		}
	}
	return append([]string{path, "--sentinel"}, s.cfg.extra...), nil
}
