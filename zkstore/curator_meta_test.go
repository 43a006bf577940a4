package zkstore_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// A lock held by Apache Curator's InterProcessMutex shows what Curator
// writes as node data (the client's IP address) as the holder's metadata,
// read by Inspect and List; the holder is foreign and has no token.
func TestCuratorHolderShowsItsNodeData(t *testing.T) {
	java, cp := curatorProgram(t)
	addrs := server(t).Addrs()
	root := testPath(t)
	conn := dialRaw(t, addrs, faultTimeout)
	makeParents(t, conn, root+"/locks")
	counter, marker := root+"/counter", root+"/inside"
	if _, err := conn.Create(counter, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	s, err := zkstore.Dial(dctx, addrs, zkstore.Options{Root: root + "/locks", SessionTimeout: faultTimeout})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	// One round that holds the lock for 8 s: the marker node says Curator
	// is inside its critical section.
	ctx := testCtx(t, 60*time.Second)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	startCurator(t, cctx, java, cp, strings.Join(addrs, ","), root+"/locks/ctr", counter, marker, "1", "8000")
	testkit.WaitFor(t, 30*time.Second, "Curator inside its critical section", func() bool {
		ok, _, err := conn.Exists(marker)
		return err == nil && ok
	})
	info, err := s.Inspect(ctx, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || !info.Foreign || info.Token != "" {
		t.Fatalf("Inspect = %+v, want a foreign holder", info)
	}
	if net.ParseIP(info.Meta) == nil {
		t.Fatalf("Inspect Meta = %q, want Curator's node data, an IP address", info.Meta)
	}
	n := 0
	err = s.List(ctx, "ctr", func(key string, li driver.Info) bool {
		n++
		if key != "ctr" || li.Meta != info.Meta {
			t.Errorf("List: %q %+v, want ctr with Meta %q", key, li, info.Meta)
		}
		return true
	})
	if err != nil || n != 1 {
		t.Fatalf("List: %d keys, %v", n, err)
	}
}
