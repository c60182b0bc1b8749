package io.redissonlock.peer;

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.redisson.config.SingleServerConfig;

/**
 * The bench peer of `benches/` (the `redisson-java` and `redisson-java-tuned` libraries): W1,
 * W2, W3, W3f and W3w of `shared/reference/peer-bench.md` with real Redisson, in one JVM, each
 * timed window after a JIT warm-up of the same work. The bench process starts this main, reads
 * its stdout and brackets every timed window with the server's counters:
 *
 * <pre>
 *   INFO key=value ...            what runs (JVM, Redisson, settings)
 *   BEGIN tag                     then reads one line on stdin (the bench took its snapshot)
 *   H proc task name req acq rel_s rel_e   one per hold (W3, W3f, W3w; System.nanoTime =
 *                                 CLOCK_MONOTONIC on Linux)
 *   END tag key=value ...         then reads one line on stdin
 *   FAIL tag message              the workload failed (no END)
 * </pre>
 *
 * Client CPU is the whole JVM's process CPU time (OperatingSystemMXBean): JIT compiler and GC
 * threads included; GC and JIT milliseconds of the window are reported beside it.
 * W3's "two processes" are two RedissonClients (each its own connections, pub/sub connections,
 * event loops and UUID) in this JVM, four platform threads each.
 */
public final class Bench {
    private static final PrintStream OUT = new PrintStream(
            new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final BufferedReader IN =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    private final String url;
    private final String lib;
    private final boolean tuned;
    private final double warmupSecs;

    private Bench(String url, String lib, double warmupSecs) {
        this.url = url;
        this.lib = lib;
        this.tuned = lib.endsWith("-tuned");
        this.warmupSecs = warmupSecs;
    }

    static void line(String s) {
        synchronized (OUT) {
            OUT.print(s);
            OUT.print('\n');
            OUT.flush();
        }
    }

    /** Prints a line and waits for the bench's go-ahead (one line on stdin). */
    static void sync(String s) throws Exception {
        line(s);
        if (IN.readLine() == null) {
            throw new IllegalStateException("the bench closed stdin");
        }
    }

    /** Redisson's defaults, or what a performance-minded user sets. */
    Config config() {
        Config c = new Config();
        SingleServerConfig s = c.useSingleServer();
        s.setAddress(url);
        if (tuned) {
            int cpus = Runtime.getRuntime().availableProcessors();
            // One in-flight command per pooled connection: a pool as large as the largest
            // platform-thread count, opened up front; few event-loop threads (the cores are
            // the bound, not the sockets); EVALSHA instead of EVAL.
            s.setConnectionPoolSize(256);
            s.setConnectionMinimumIdleSize(256);
            s.setSubscriptionConnectionPoolSize(50);
            c.setNettyThreads(Math.max(2, 2 * cpus));
            c.setThreads(Math.max(2, cpus));
            c.setUseScriptCache(true);
        }
        return c;
    }

    static String describe(Config c) {
        SingleServerConfig s = c.useSingleServer();
        return "connectionPoolSize=" + s.getConnectionPoolSize()
                + " connectionMinimumIdleSize=" + s.getConnectionMinimumIdleSize()
                + " subscriptionConnectionPoolSize=" + s.getSubscriptionConnectionPoolSize()
                + " nettyThreads=" + c.getNettyThreads() + " threads=" + c.getThreads()
                + " useScriptCache=" + c.isUseScriptCache()
                + " lockWatchdogTimeout=" + c.getLockWatchdogTimeout();
    }

    static String redissonVersion() {
        try (InputStream in = Bench.class.getResourceAsStream(
                "/META-INF/maven/org.redisson/redisson/pom.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "?");
        } catch (Exception e) {
            return "?";
        }
    }

    static long cpuNs() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return -1;
    }

    static long gcMs() {
        long t = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            t += Math.max(0, b.getCollectionTime());
        }
        return t;
    }

    static long jitMs() {
        CompilationMXBean c = ManagementFactory.getCompilationMXBean();
        return c != null && c.isCompilationTimeMonitoringSupported() ? c.getTotalCompilationTime() : 0;
    }

    /** CPU, GC and JIT counters at the start of a window; {@link #fields} gives the deltas. */
    static final class Counters {
        final long cpu = cpuNs();
        final long gc = gcMs();
        final long jit = jitMs();

        String fields() {
            return "cpu_ns=" + (cpuNs() - cpu) + " gc_ms=" + (gcMs() - gc) + " jit_ms=" + (jitMs() - jit);
        }
    }

    /** Starts a thread running r: a platform thread, or a virtual one (Java 21+, by reflection:
     * this class compiles for Java 17). */
    static Thread start(Runnable r, boolean virtual) throws Exception {
        if (!virtual) {
            Thread t = new Thread(r);
            t.start();
            return t;
        }
        Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
        Method m = Class.forName("java.lang.Thread$Builder").getMethod("start", Runnable.class);
        return (Thread) m.invoke(builder, r);
    }

    static boolean hasVirtualThreads() {
        try {
            Thread.class.getMethod("ofVirtual");
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }

    interface Body {
        void run() throws Exception;
    }

    /** Runs body on n threads; returns the first failure (or null) once all are done. */
    static Throwable onThreads(int n, boolean virtual, java.util.function.IntFunction<Body> body)
            throws Exception {
        AtomicReference<Throwable> err = new AtomicReference<>();
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Body b = body.apply(i);
            ts.add(start(() -> {
                try {
                    b.run();
                } catch (Throwable e) {
                    err.compareAndSet(null, e);
                }
            }, virtual));
        }
        for (Thread t : ts) {
            t.join();
        }
        return err.get();
    }

    // W1: one thread, lock+unlock on one name; 50 untimed cycles, then `cycles` timed ones.
    void w1(RedissonClient c, int cycles) throws Exception {
        Lock l = c.getLock("w1:" + lib);
        long until = System.nanoTime() + (long) (warmupSecs * 1e9);
        while (System.nanoTime() < until) {
            l.lock();
            l.unlock();
        }
        sync("BEGIN w1");
        Counters k = new Counters();
        long[] lat = new long[cycles];
        for (int i = 0; i < cycles + 50; i++) {
            long t0 = System.nanoTime();
            l.lock();
            l.unlock();
            if (i >= 50) {
                lat[i - 50] = System.nanoTime() - t0;
            }
        }
        String f = k.fields();
        Arrays.sort(lat);
        sync("END w1 cycles=" + cycles + " p50_ns=" + pct(lat, 50) + " p99_ns=" + pct(lat, 99) + " " + f);
    }

    /** The bench's percentile: nearest rank over the sorted values. */
    static long pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.round(p / 100.0 * (sorted.length - 1));
        return sorted[Math.min(sorted.length - 1, Math.max(0, i))];
    }

    // W2: n threads on distinct names, 5 cycles each, then lock+unlock cycles for `secs`.
    // `timed`: bracket the window with BEGIN/END (false: the JIT warm-up of the same work).
    void w2(RedissonClient c, int n, double secs, boolean virtual, boolean timed) throws Exception {
        String tag = (virtual ? "w2vt." : "w2.") + n;
        CyclicBarrier barrier = new CyclicBarrier(n + 1);
        AtomicLong total = new AtomicLong();
        AtomicLong deadline = new AtomicLong();
        AtomicReference<Throwable> err = new AtomicReference<>();
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Lock l = c.getLock("w2:" + lib + (virtual ? "-vt" : "") + ":" + n + ":" + i);
            ts.add(start(() -> {
                long done = 0;
                try {
                    for (int j = 0; j < 5; j++) {
                        l.lock();
                        l.unlock();
                    }
                } catch (Throwable e) {
                    err.compareAndSet(null, e);
                }
                try {
                    barrier.await();
                } catch (Exception e) {
                    err.compareAndSet(null, e);
                    return;
                }
                try {
                    long end = deadline.get();
                    while (err.get() == null && System.nanoTime() < end) {
                        l.lock();
                        l.unlock();
                        done++;
                    }
                } catch (Throwable e) {
                    err.compareAndSet(null, e);
                }
                total.addAndGet(done);
            }, virtual));
        }
        if (timed) {
            sync("BEGIN " + tag);
        }
        Counters k = new Counters();
        long t0 = System.nanoTime();
        deadline.set(t0 + (long) (secs * 1e9));
        barrier.await();
        for (Thread t : ts) {
            t.join();
        }
        long wall = System.nanoTime() - t0;
        String f = k.fields();
        if (err.get() != null) {
            throw new RuntimeException(err.get());
        }
        if (timed) {
            sync("END " + tag + " cycles=" + total.get() + " wall_ns=" + wall + " " + f);
        }
    }

    /** W3 (kind "w3": RLock, "w3f": fair lock) or W3w ("w3w"): 2 clients x 4 threads. */
    void w3(RedissonClient[] cs, String kind, double secs, boolean timed) throws Exception {
        boolean wake = kind.equals("w3w");
        List<long[]> holds = java.util.Collections.synchronizedList(new ArrayList<>());
        if (timed) {
            sync("BEGIN " + kind);
        }
        Counters k = new Counters();
        long start = System.nanoTime() + 200_000_000L;
        long end = start + (long) (secs * 1e9);
        Throwable e = onThreads(8, false, i -> {
            int proc = i / 4;
            int task = i % 4;
            RedissonClient c = cs[proc];
            String name = wake ? "w3w:" + lib + ":" + task : kind + ":" + lib;
            Lock l = kind.equals("w3f") ? c.getFairLock(name) : c.getLock(name);
            Random rng = new Random(((long) proc << 32 | task) ^ start);
            return () -> {
                while (System.nanoTime() < start) {
                    Thread.sleep(Math.max(1, (start - System.nanoTime()) / 1_000_000));
                }
                while (System.nanoTime() < end) {
                    long req = System.nanoTime();
                    l.lock();
                    long acq = System.nanoTime();
                    if (wake) {
                        Thread.sleep(450 + rng.nextInt(201));
                    }
                    long relS = System.nanoTime();
                    l.unlock();
                    long relE = System.nanoTime();
                    holds.add(new long[] {proc, task, wake ? task : 0, req, acq, relS, relE});
                    if (wake) {
                        Thread.sleep(400);
                    }
                }
            };
        });
        String f = k.fields();
        if (e != null) {
            throw new RuntimeException(e);
        }
        if (!timed) {
            return;
        }
        StringBuilder sb = new StringBuilder();
        for (long[] h : holds) {
            sb.setLength(0);
            sb.append('H');
            for (long v : h) {
                sb.append(' ').append(v);
            }
            line(sb.toString());
        }
        sync("END " + kind + " start_ns=" + start + " holds=" + holds.size() + " " + f);
    }

    public static void main(String[] args) throws Exception {
        String url = null;
        String lib = "redisson-java";
        List<String> only = List.of("w1", "w2", "w3", "w3f", "w3w");
        int w1Cycles = 2000;
        double w2Secs = 2;
        double w3Secs = 5;
        double w3wSecs = 5;
        double warmup = 1;
        int[] w2Threads = {1, 16, 64, 256};
        int[] vtThreads = {256, 1024};
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "--url": url = v; break;
                case "--lib": lib = v; break;
                case "--only": only = List.of(v.split(",")); break;
                case "--w1-cycles": w1Cycles = Integer.parseInt(v); break;
                case "--w2-secs": w2Secs = Double.parseDouble(v); break;
                case "--w3-secs": w3Secs = Double.parseDouble(v); break;
                case "--w3w-secs": w3wSecs = Double.parseDouble(v); break;
                case "--warmup-secs": warmup = Double.parseDouble(v); break;
                case "--w2-threads": w2Threads = ints(v); break;
                case "--vt-threads": vtThreads = ints(v); break;
                default:
                    System.err.println("redisson-bench: unknown option " + args[i]);
                    System.exit(2);
            }
        }
        if (url == null || !(lib.equals("redisson-java") || lib.equals("redisson-java-tuned"))) {
            System.err.println("usage: --url URL [--lib redisson-java|redisson-java-tuned] [--only w1,w2,w3,w3f,w3w] "
                    + "[--w1-cycles N] [--w2-secs S] [--w2-threads 1,16,64,256] [--vt-threads 256,1024] "
                    + "[--w3-secs S] [--w3w-secs S] [--warmup-secs S]");
            System.exit(2);
        }
        final int cycles1 = w1Cycles;
        final double warm = warmup;
        final double secs2 = w2Secs;
        final double secs3 = w3Secs;
        final double secs3w = w3wSecs;
        Bench b = new Bench(url, lib, warmup);
        Config config = b.config();
        boolean vt = hasVirtualThreads();
        StringBuilder gcs = new StringBuilder();
        for (GarbageCollectorMXBean g : ManagementFactory.getGarbageCollectorMXBeans()) {
            gcs.append(gcs.length() == 0 ? "" : "+").append(g.getName().replace(' ', '_'));
        }
        line("INFO java=" + System.getProperty("java.version") + " vm=" + System.getProperty("java.vm.name").replace(' ', '_')
                + " vendor=" + System.getProperty("java.vendor").replace(' ', '_')
                + " cpus=" + Runtime.getRuntime().availableProcessors()
                + " maxheap_mb=" + Runtime.getRuntime().maxMemory() / (1 << 20) + " gc=" + gcs
                + " virtual_threads=" + (vt ? "yes" : "no") + " redisson=" + redissonVersion());
        line("INFO settings " + lib + ": " + describe(config));
        RedissonClient[] cs = {Redisson.create(config), Redisson.create(b.config())};
        try {
            if (only.contains("w1")) {
                b.guard("w1", () -> b.w1(cs[0], cycles1));
            }
            if (only.contains("w2")) {
                for (int n : w2Threads) {
                    b.guard("w2." + n, () -> {
                        b.w2(cs[0], n, warm, false, false);
                        b.w2(cs[0], n, secs2, false, true);
                    });
                }
                if (vt) {
                    for (int n : vtThreads) {
                        b.guard("w2vt." + n, () -> {
                            b.w2(cs[0], n, warm, true, false);
                            b.w2(cs[0], n, secs2, true, true);
                        });
                    }
                }
            }
            for (String kind : new String[] {"w3", "w3f", "w3w"}) {
                if (!only.contains(kind)) {
                    continue;
                }
                double secs = kind.equals("w3w") ? secs3w : secs3;
                b.guard(kind, () -> {
                    if (!kind.equals("w3w")) {
                        b.w3(cs, kind, warm, false);
                    }
                    b.w3(cs, kind, secs, true);
                });
            }
        } finally {
            for (RedissonClient c : cs) {
                c.shutdown();
            }
        }
        line("DONE");
        System.exit(0);
    }

    void guard(String tag, Body body) {
        try {
            body.run();
        } catch (Throwable e) {
            Throwable c = e.getCause() != null ? e.getCause() : e;
            line("FAIL " + tag + " " + c.getClass().getSimpleName() + ": " + String.valueOf(c.getMessage()).replace('\n', ' '));
        }
    }

    static int[] ints(String v) {
        return Arrays.stream(v.split(",")).filter(s -> !s.isEmpty()).mapToInt(Integer::parseInt).toArray();
    }
}
