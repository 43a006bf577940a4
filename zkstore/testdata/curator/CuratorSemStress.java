// CuratorSemStress is the JVM side of zkstore's semaphore benchmark against
// Curator (curator_sem_bench_test.go): threads of one Curator client take
// one lease at a time of one InterProcessSemaphoreV2 and report each
// holding's interval on the wall clock, which the Go side checks for more
// than the limit inside at once.
//
// Usage: java CuratorSemStress <connect> <path> <threads> <rounds> <limit> <seed>
//
// Output: "READY" once connected and warmed up; after a line on standard
// input ("GO") the threads start, and it prints one line per holding,
// "H r <enter µs> <exit µs>" (enter after acquire returned, exit before
// the lease is returned), then "DONE". Exit status 0, or 2 with
// "ERR <reason>".
import java.time.Instant;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorSemStress {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static long micros() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1000000L + i.getNano() / 1000;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            say("ERR usage: <connect> <path> <threads> <rounds> <limit> <seed>");
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
        int limit = Integer.parseInt(args[4]);
        long seed = Long.parseLong(args[5]);
        InterProcessSemaphoreV2 warm = new InterProcessSemaphoreV2(cf, path + "-warm", limit);
        warm.returnLease(warm.acquire()); // loads the recipe's classes before the timed part
        say("READY");
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine(); // "GO"
        Thread[] ts = new Thread[threads];
        for (int n = 0; n < threads; n++) {
            final Random rng = new Random(seed + n);
            ts[n] = new Thread(() -> {
                InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(cf, path, limit);
                try {
                    for (int r = 0; r < rounds; r++) {
                        Lease lease = sem.acquire();
                        long enter = micros();
                        Thread.sleep(rng.nextInt(4));
                        long exit = micros();
                        lease.close();
                        say("H r " + enter + " " + exit);
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
