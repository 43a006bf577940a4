// Package redisserver runs real redis-server processes for tests.
//
// The dlock tests (single-instance locks, Redlock, Cluster, Sentinel and the
// chaos tests) exercise a real Redis instead of a fake, so that expiry,
// persistence, failover and network behaviour are the ones production sees.
// This package starts those servers and keeps them under control:
//
//   - Servers listen on 127.0.0.1 only, on a free port chosen by the kernel,
//     in a private temporary directory (t.TempDir()).
//   - Persistence is off by default (no RDB snapshots, no AOF); WithAOF turns
//     the append-only file on so that data survives a Kill and Restart.
//     Full resynchronisation of replicas starts without the default 5 s
//     delay (--repl-diskless-sync-delay 0).
//   - Every server is always cleaned up: Start registers a t.Cleanup that
//     SIGKILLs the process group and waits for it, and on Linux the child is
//     started with Pdeathsig=SIGKILL so a crashed or killed test binary does
//     not leave orphan servers behind.
//   - Faults are injected with Kill (crash), Stop (graceful), Pause/Resume
//     (SIGSTOP/SIGCONT, a frozen but connected node) and Restart (same port,
//     same directory, same options).
//
// StartN, StartCluster and StartSentinel build the multi-node topologies
// (independent primaries for Redlock, a Redis Cluster, a primary/replica pair
// watched by three sentinels). Server.Do sends one raw RESP command, which is
// enough for test set-up such as CONFIG SET, DEBUG or CLIENT PAUSE without a
// client library.
//
// Tests skip when redis-server is not installed, except when the environment
// variable CI is "true", where a missing binary fails the test. The package
// depends on the standard library only and supports Linux and other Unix
// systems.
package redisserver
