// Package etcdtest adds the client-based helpers (clients, leader finding) to
// the etcd test servers of example.com/dlock/internal/etcdserver, which
// starts, stops, kills, restarts and pauses real etcd processes on free
// loopback ports without any etcd client dependency.
//
// When the binary is missing the test is skipped with a message, unless the
// environment variable CI is "true", where it fails: CI must install it.
package etcdtest

import (
	"testing"

	"example.com/dlock/internal/etcdserver"
)

// Member is one etcd process (see etcdserver.Member).
type Member = etcdserver.Member

// Cluster is a set of etcd members started together, with the client-based
// helpers of this package.
type Cluster struct {
	*etcdserver.Cluster
}

// Binary returns the path of the etcd binary, or skips (fails under CI=true)
// the test when there is none.
func Binary(t testing.TB) string { t.Helper(); return etcdserver.Binary(t) }

// Etcdctl returns the path of the etcdctl binary, or skips (fails under
// CI=true) the test when there is none.
func Etcdctl(t testing.TB) string { t.Helper(); return etcdserver.Etcdctl(t) }

// Find returns the path of the binary name, or "" if there is none.
func Find(name string) string { return etcdserver.Find(name) }

// Required reports whether missing binaries fail tests (CI=true) rather
// than skip them.
func Required() bool { return etcdserver.Required() }

// Start starts a single-node etcd, killed when the test ends.
func Start(t testing.TB) *Cluster { t.Helper(); return wrap(etcdserver.Start(t)) }

// StartCluster starts n members forming one cluster and waits until every
// member answers /health. It fails the test on any error, with the members'
// logs, and kills the members when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return wrap(etcdserver.StartCluster(t, n))
}

// Launch starts n members with the binary bin, their data under dir (see
// etcdserver.Launch). The caller must call Stop, also after an error when the
// cluster is not nil.
func Launch(bin, dir string, n int) (*Cluster, error) {
	c, err := etcdserver.Launch(bin, dir, n)
	return wrap(c), err
}

func wrap(c *etcdserver.Cluster) *Cluster {
	if c == nil {
		return nil
	}
	return &Cluster{Cluster: c}
}
