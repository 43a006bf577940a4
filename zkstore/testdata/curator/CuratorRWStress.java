// CuratorRWStress is the JVM side of zkstore's mixed read-write lock test
// (curator_rw_interop_test.go): threads of one Curator client take one
// InterProcessReadWriteLock, a third of the time to write, and report each
// holding's interval on the wall clock, which the Go side (on the same
// machine) checks against its own for a writer with anyone.
//
// Usage: java CuratorRWStress <connect> <path> <threads> <rounds> <seed>
//
// Output: "READY" once connected and warmed up; after a line on standard
// input ("GO") the threads start, and it prints one line per holding,
// "H <r|w> <enter µs> <exit µs>" (enter after acquire returned, exit before
// release), then "DONE". Exit status 0, or 2 with "ERR <reason>".
import java.time.Instant;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryNTimes;

public class CuratorRWStress {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static long micros() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1000000L + i.getNano() / 1000;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            say("ERR usage: <connect> <path> <threads> <rounds> <seed>");
            System.exit(2);
        }
        CuratorFramework cf = CuratorFrameworkFactory.builder().connectString(args[0])
                .sessionTimeoutMs(10000).connectionTimeoutMs(5000).retryPolicy(new RetryNTimes(3, 100)).build();
        cf.start();
        if (!cf.blockUntilConnected(20, TimeUnit.SECONDS)) {
            say("ERR not connected to " + args[0]);
            System.exit(2);
        }
        String path = args[1];
        int threads = Integer.parseInt(args[2]), rounds = Integer.parseInt(args[3]);
        long seed = Long.parseLong(args[4]);
        InterProcessMutex warm = new InterProcessReadWriteLock(cf, path + "-warm").readLock();
        warm.acquire(); // loads the recipe's classes before the timed part
        warm.release();
        say("READY");
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine(); // "GO"
        Thread[] ts = new Thread[threads];
        for (int n = 0; n < threads; n++) {
            final Random rng = new Random(seed + n);
            ts[n] = new Thread(() -> {
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(cf, path);
                try {
                    for (int r = 0; r < rounds; r++) {
                        boolean write = rng.nextInt(3) == 0;
                        InterProcessMutex m = write ? rw.writeLock() : rw.readLock();
                        m.acquire();
                        long enter = micros();
                        Thread.sleep(rng.nextInt(4));
                        long exit = micros();
                        m.release();
                        say("H " + (write ? "w" : "r") + " " + enter + " " + exit);
                    }
                } catch (Exception e) {
                    say("ERR " + e);
                }
            });
            ts[n].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        say("DONE");
        cf.close();
    }
}
