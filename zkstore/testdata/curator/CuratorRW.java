// CuratorRW is the JVM side of zkstore's read-write lock interoperability
// test (curator_rw_interop_test.go): Apache Curator's
// InterProcessReadWriteLock, as a Java service would use it, driven line by
// line from standard input.
//
// Usage: java CuratorRW <connect>
//
// Commands, one a line: "<id> read <path>", "<id> write <path>" (acquire,
// blocking, on the thread of id with that id's InterProcessReadWriteLock on
// path), "<id> lease <path> <max>" (acquire one lease of an
// InterProcessSemaphoreV2 on path with maxLeases max) and "<id> release"
// (release what id holds). Output, one line each:
// "READY" once connected, "GOT <id> <read|write|lease>" once acquired,
// "REL <id>" once released, "ERR <id> <reason>" on failure. Each id has
// its own thread (Curator's locks belong to the thread that took them).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorRW {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            say("ERR - usage: <connect>");
            System.exit(2);
        }
        CuratorFramework cf = CuratorFrameworkFactory.builder().connectString(args[0])
                .sessionTimeoutMs(10000).connectionTimeoutMs(5000).retryPolicy(new RetryNTimes(3, 100)).build();
        cf.start();
        if (!cf.blockUntilConnected(20, TimeUnit.SECONDS)) {
            say("ERR - not connected to " + args[0]);
            System.exit(2);
        }
        Map<String, LinkedBlockingQueue<String[]>> workers = new HashMap<>();
        say("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split(" ");
            LinkedBlockingQueue<String[]> q = workers.get(f[0]);
            if (q == null) {
                LinkedBlockingQueue<String[]> nq = new LinkedBlockingQueue<>();
                workers.put(f[0], nq);
                Thread th = new Thread(() -> work(cf, f[0], nq));
                th.setDaemon(true);
                th.start();
                q = nq;
            }
            q.put(f);
        }
        cf.close();
    }

    // work runs id's commands on one thread.
    static void work(CuratorFramework cf, String id, LinkedBlockingQueue<String[]> q) {
        InterProcessReadWriteLock rw = null;
        InterProcessMutex held = null;
        Lease lease = null;
        while (true) {
            try {
                String[] f = q.take();
                switch (f[1]) {
                case "read":
                case "write":
                    if (rw == null) {
                        rw = new InterProcessReadWriteLock(cf, f[2]);
                    }
                    held = f[1].equals("read") ? rw.readLock() : rw.writeLock();
                    held.acquire();
                    say("GOT " + id + " " + f[1]);
                    break;
                case "lease":
                    lease = new InterProcessSemaphoreV2(cf, f[2], Integer.parseInt(f[3])).acquire();
                    say("GOT " + id + " lease");
                    break;
                case "release":
                    if (lease != null) {
                        lease.close();
                        lease = null;
                    } else {
                        held.release();
                        held = null;
                    }
                    say("REL " + id);
                    break;
                default:
                    say("ERR " + id + " unknown command " + f[1]);
                }
            } catch (Exception e) {
                say("ERR " + id + " " + e);
            }
        }
    }
}
