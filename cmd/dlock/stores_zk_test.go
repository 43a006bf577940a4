package main

import (
	"strings"
	"testing"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/internal/zkserver"
)

// TestZooKeeperCLI drives the CLI against a real standalone ZooKeeper
// (internal/zkserver): every command, the demo's zookeeper strategy, and
// `schema`, which ZooKeeper has none of.
func TestZooKeeperCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a real ZooKeeper")
	}
	store := "zk://" + zkserver.Start(t).Addrs()[0] + "/locks?session-timeout=4s"
	t.Run("commands", func(t *testing.T) { checkStoreCommands(t, store) })
	t.Run("demo", func(t *testing.T) {
		out := checkDemoStore(t, store, inventory.ZooKeeperStrategy)
		if !strings.Contains(out.Server, "zookeeper strategy's lock on zookeeper") {
			t.Errorf("the server names the ZooKeeper lock: %q", out.Server)
		}
	})
	t.Run("schema", func(t *testing.T) {
		r := runDlock(t, nil, "schema", "--store", store)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "has no schema") {
			t.Errorf("schema on ZooKeeper: %s", r)
		}
	})
}
