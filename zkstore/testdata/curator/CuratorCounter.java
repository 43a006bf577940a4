// CuratorCounter is the JVM side of zkstore's Curator interoperability test
// (curator_test.go): Apache Curator's InterProcessMutex, as a Java service
// would use it, contending with a dlock Client for one lock path.
//
// Usage: java CuratorCounter <connect> <lockPath> <counterPath> <markerPath> <rounds> <gapMillis> [<user:password>]
//
// With user:password the session authenticates with the digest scheme and
// creates every node with ZooDefs.Ids.CREATOR_ALL_ACL (an ACLProvider), as a
// service that keeps its lock nodes private does.
//
// Each round: note whether the lock already has participants (then this
// side will wait for the other), acquire, create the ephemeral marker
// (NodeExists: another side is inside too, an overlap), read the counter
// znode, sleep gapMillis, write the counter + 1 unconditionally (a lost
// update if the other side wrote in between), delete the marker, release.
// Output, one line each: "READY" once connected, then
// "DONE rounds=<n> waited=<n> overlaps=<n>", and one "SAW <node>" per
// distinct participant node seen before an acquire. Exit status 0, or 2
// with "ERR <reason>" on stdout.
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.ACLProvider;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;

public class CuratorCounter {
    public static void main(String[] args) throws Exception {
        if (args.length != 6 && args.length != 7) {
            System.out.println("ERR usage: <connect> <lockPath> <counterPath> <markerPath> <rounds> <gapMillis> [<user:password>]");
            System.exit(2);
        }
        String connect = args[0], lockPath = args[1], counterPath = args[2], markerPath = args[3];
        int rounds = Integer.parseInt(args[4]);
        long gap = Long.parseLong(args[5]);
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder().connectString(connect)
                .sessionTimeoutMs(10000).connectionTimeoutMs(5000).retryPolicy(new RetryNTimes(3, 100));
        if (args.length == 7) {
            b = b.authorization("digest", args[6].getBytes(StandardCharsets.UTF_8)).aclProvider(new ACLProvider() {
                public List<ACL> getDefaultAcl() { return ZooDefs.Ids.CREATOR_ALL_ACL; }
                public List<ACL> getAclForPath(String path) { return ZooDefs.Ids.CREATOR_ALL_ACL; }
            });
        }
        CuratorFramework cf = b.build();
        cf.start();
        if (!cf.blockUntilConnected(20, TimeUnit.SECONDS)) {
            System.out.println("ERR not connected to " + connect);
            System.exit(2);
        }
        InterProcessMutex lock = new InterProcessMutex(cf, lockPath);
        System.out.println("READY");
        System.out.flush();
        int waited = 0, overlaps = 0;
        TreeSet<String> seen = new TreeSet<>();
        for (int i = 0; i < rounds; i++) {
            Collection<String> before = lock.getParticipantNodes();
            if (!before.isEmpty()) {
                waited++;
                seen.addAll(before);
            }
            if (!lock.acquire(30, TimeUnit.SECONDS)) {
                System.out.println("ERR round " + i + ": lock not acquired in 30 s");
                System.exit(2);
            }
            try {
                try {
                    cf.create().withMode(CreateMode.EPHEMERAL).forPath(markerPath);
                } catch (KeeperException.NodeExistsException e) {
                    overlaps++;
                }
                int n = Integer.parseInt(new String(cf.getData().forPath(counterPath), StandardCharsets.UTF_8).trim());
                Thread.sleep(gap); // the critical section's work
                cf.setData().forPath(counterPath, Integer.toString(n + 1).getBytes(StandardCharsets.UTF_8));
                try {
                    cf.delete().forPath(markerPath);
                } catch (KeeperException.NoNodeException e) {
                    // the other side deleted it: counted as an overlap there
                }
            } finally {
                lock.release();
            }
        }
        for (String s : seen) {
            System.out.println("SAW " + s);
        }
        System.out.println("DONE rounds=" + rounds + " waited=" + waited + " overlaps=" + overlaps);
        System.out.flush();
        cf.close();
    }
}
