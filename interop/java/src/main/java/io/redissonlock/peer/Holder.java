package io.redissonlock.peer;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RScript;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.BaseMasterSlaveServersConfig;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ConstantDelay;
import org.redisson.config.ReadMode;
import org.redisson.config.SentinelServersConfig;
import org.redisson.config.SingleServerConfig;

/**
 * A lock holder process for the fault suite, the Java twin of {@code tests/holder}: real
 * Redisson, public API only, the same flags and the same history lines, so the checker
 * ({@code tests/it/support/checker.rs}) reads both languages' files unchanged.
 *
 * <pre>
 * java -cp redisson-peer-4.7.0.jar io.redissonlock.peer.Holder --url redis://127.0.0.1:6379 \
 *   --lock demo --history /tmp/h1 [--kind fenced|rlock|fair|write|read|redlock|multilock] ...
 * </pre>
 *
 * Times are {@link System#nanoTime()}, which is CLOCK_MONOTONIC on Linux: the clock of the
 * Rust holders ({@code --clock-probe 1} prints it once per stdin line, for the test that checks
 * this). {@code lost=1}: before the release the hold is no longer this thread's
 * ({@code isHeldByCurrentThread()} false, or the query failed); {@code unlock=lost}: the unlock
 * threw {@link IllegalMonitorStateException}. {@code --node-timeout-ms} is accepted and ignored
 * (Redisson's RedLock has no per-node timeout: it splits the wait among the members).
 * {@code redlock} and {@code multilock} take the lock {@code --lock} on each node of
 * {@code --urls} (one client per node), through {@code getRedLock} / {@code getMultiLock}.
 */
public final class Holder {
    private static final TimeUnit MS = TimeUnit.MILLISECONDS;

    /** The toy fenced resource, the same script as the Rust holder's: strictly above the max. */
    static final String FENCED_WRITE = String.join("\n",
            "local max = tonumber(redis.call('get', KEYS[1]) or '0')",
            "local token = tonumber(ARGV[1])",
            "if token <= max then",
            "    return 0",
            "end",
            "redis.call('set', KEYS[1], token)",
            "redis.call('rpush', KEYS[2], ARGV[1] .. ':' .. ARGV[2])",
            "return 1");

    private static final Set<String> FLAGS = new HashSet<>(Arrays.asList(
            "url", "store", "lock", "history", "iterations", "forever", "hold-ms", "rmw-ms",
            "gap-ms", "lease-ms", "watchdog-ms", "response-ms", "kind", "urls",
            "node-timeout-ms", "fair-wait-ms", "max-secs", "stop-file", "clock-probe",
            "sentinels", "master", "cluster", "replica-sync", "failover-aware"));

    /**
     * The history clock: CLOCK_MONOTONIC nanoseconds on Linux. Under libfaketime
     * ({@code FAKETIME} set), which fakes it, the true one from {@code TrueClock} (Java 22+,
     * compiled apart by {@code scripts/ensure-java}): a history on the faked clock could not be
     * compared with the other holders'. Without it there, the holder refuses to start.
     */
    private static final java.lang.invoke.MethodHandle TRUE_CLOCK = trueClock();

    private static java.lang.invoke.MethodHandle trueClock() {
        if (System.getenv("FAKETIME") == null) {
            return null;
        }
        try {
            return java.lang.invoke.MethodHandles.publicLookup().findStatic(
                    Class.forName("TrueClock"), "nanos",
                    java.lang.invoke.MethodType.methodType(long.class));
        } catch (ReflectiveOperationException | LinkageError e) {
            throw new IllegalStateException("under libfaketime the history needs TrueClock "
                    + "(a JDK 22+ and scripts/ensure-java): " + e, e);
        }
    }

    static long now() {
        if (TRUE_CLOCK == null) {
            return System.nanoTime();
        }
        try {
            return (long) TRUE_CLOCK.invokeExact();
        } catch (Throwable e) {
            throw new IllegalStateException("TrueClock failed: " + e, e);
        }
    }

    /** Bad command line: a message and exit code 2. */
    private static final class Usage extends RuntimeException {
        Usage(String msg) {
            super(msg);
        }
    }

    private final Map<String, String> args;
    private final long pid = ProcessHandle.current().pid();
    private FileOutputStream file;

    private Holder(Map<String, String> args) {
        this.args = args;
    }

    public static void main(String[] argv) {
        Map<String, String> a;
        try {
            a = parse(argv);
            if (num(a, "clock-probe", 0) == 1) {
                clockProbe();
                return;
            }
            for (String required : new String[] {"lock", "history"}) {
                if (!a.containsKey(required)) {
                    throw new Usage("--" + required + " is required");
                }
            }
            int targets = (a.containsKey("url") ? 1 : 0) + (a.containsKey("sentinels") ? 1 : 0)
                    + (a.containsKey("cluster") ? 1 : 0);
            if (targets != 1) {
                throw new Usage("one of --url, --sentinels or --cluster is required");
            }
            if (!a.containsKey("url") && !a.containsKey("store")) {
                throw new Usage("--store is required with --sentinels or --cluster");
            }
            if (num(a, "failover-aware", 0) != 0) {
                // The Rust holder's flag: Redisson follows a failover with its connections
                // but never checks its holds there.
                throw new Usage("--failover-aware 1: Redisson has no failover awareness");
            }
            String kind = a.getOrDefault("kind", "fenced");
            if (!Arrays.asList("fenced", "rlock", "fair", "write", "read", "redlock", "multilock")
                    .contains(kind)) {
                throw new Usage("--kind " + kind
                        + ": expected fenced, rlock, fair, write, read, redlock or multilock");
            }
            // Every number is checked before anything runs.
            for (String f : FLAGS) {
                if (f.endsWith("-ms") || f.equals("iterations") || f.equals("forever")
                        || f.equals("max-secs") || f.equals("replica-sync")
                        || f.equals("failover-aware")) {
                    num(a, f, 0);
                }
            }
        } catch (Usage e) {
            System.err.println("holder: " + e.getMessage());
            System.err.println("usage: (--url URL | --sentinels H:P,... [--master NAME] | "
                    + "--cluster URL,...) --lock NAME --history FILE [--store URL] "
                    + "[--replica-sync MS (0: off)] [--failover-aware 0] "
                    + "[--kind fenced|rlock|fair|write|read|redlock|multilock] [--urls a,b,c] "
                    + "[--iterations N] [--forever 0|1] [--hold-ms N] [--rmw-ms N] [--gap-ms N] "
                    + "[--lease-ms N] [--watchdog-ms N] [--response-ms N] [--fair-wait-ms N] "
                    + "[--node-timeout-ms N] [--max-secs N] [--stop-file FILE] | --clock-probe 1");
            System.exit(2);
            return;
        }
        int code = new Holder(a).run();
        System.exit(code);
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i < argv.length; i += 2) {
            String k = argv[i];
            if (!k.startsWith("--") || !FLAGS.contains(k.substring(2))) {
                throw new Usage("unknown option " + k);
            }
            if (i + 1 >= argv.length) {
                throw new Usage("missing value for " + k);
            }
            a.put(k.substring(2), argv[i + 1]);
        }
        return a;
    }

    private static long num(Map<String, String> a, String key, long dflt) {
        String v = a.get(key);
        if (v == null) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v);
            if (n < 0) {
                throw new Usage("--" + key + ": negative: " + v);
            }
            return n;
        } catch (NumberFormatException e) {
            throw new Usage("--" + key + ": not a number: " + v);
        }
    }

    /** Prints {@link #now()} once per line read on stdin, until EOF. */
    private static void clockProbe() {
        PrintStream out = new PrintStream(new FileOutputStream(java.io.FileDescriptor.out), true,
                StandardCharsets.UTF_8);
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            while (in.readLine() != null) {
                out.println(now());
            }
        } catch (IOException e) {
            System.err.println("holder: stdin: " + e);
            System.exit(1);
        }
    }

    /** One history line, written with one {@code write}: a killed process leaves whole lines. */
    private synchronized void line(String event, String... kv) {
        StringBuilder s = new StringBuilder(event).append(" pid=").append(pid);
        for (int i = 0; i + 1 < kv.length; i += 2) {
            s.append(' ').append(kv[i]).append('=').append(kv[i + 1]);
        }
        s.append('\n');
        try {
            file.write(s.toString().getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new IllegalStateException("history write failed: " + e, e);
        }
    }

    private static String oneLine(Throwable e) {
        Throwable t = unwrap(e);
        String msg = t.getClass().getSimpleName() + ":" + t.getMessage();
        return msg.replace(' ', '_').replace('\n', '_').replace('\r', '_');
    }

    private static Throwable unwrap(Throwable e) {
        Throwable t = e;
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    private Config baseConfig() {
        Config config = new Config();
        // Few threads: many holders run beside the tests on a small machine.
        config.setThreads(2);
        config.setNettyThreads(4);
        config.setLockWatchdogTimeout(num(args, "watchdog-ms", 30_000));
        config.setFairLockWaitTimeout(num(args, "fair-wait-ms", 5000));
        return config;
    }

    /** {@code redis://host:port} from {@code host:port} or {@code redis://host:port/}. */
    private static String address(String a) {
        String s = a.startsWith("redis://") ? a : "redis://" + a;
        return s.endsWith("/") ? s.substring(0, s.length() - 1) : s;
    }

    /**
     * The lock servers through Sentinel ({@code --sentinels}, {@code --master}) or a Cluster
     * ({@code --cluster}), as a Redisson user would set them up: reads from the master (the
     * holder's checks read the lock), Redisson's own replica sync of lock writes
     * ({@code checkLockSyncedSlaves}, on by default, with {@code --replica-sync} as its timeout;
     * 0 turns it off), topology scans every second.
     */
    private RedissonClient connectTopology() {
        Config config = baseConfig();
        long sync = num(args, "replica-sync", 1000);
        if (sync == 0) {
            config.setCheckLockSyncedSlaves(false);
        } else {
            config.setSlavesSyncTimeout(sync);
        }
        int response = (int) num(args, "response-ms", 3000);
        if (args.containsKey("sentinels")) {
            SentinelServersConfig s = config.useSentinelServers();
            s.setMasterName(args.getOrDefault("master", "mymaster"));
            for (String a : args.get("sentinels").split(",")) {
                s.addSentinelAddress(address(a));
            }
            s.setCheckSentinelsList(false);
            s.setScanInterval(1000);
            tune(s, response);
        } else {
            ClusterServersConfig c = config.useClusterServers();
            for (String a : args.get("cluster").split(",")) {
                c.addNodeAddress(address(a));
            }
            c.setScanInterval(1000);
            tune(c, response);
        }
        return Redisson.create(config);
    }

    /** The settings a Sentinel and a Cluster setup share: reads from the master, small pools. */
    private static void tune(BaseMasterSlaveServersConfig<?> c, int response) {
        c.setReadMode(ReadMode.MASTER);
        c.setTimeout(response);
        c.setConnectTimeout(response);
        c.setRetryAttempts(1);
        c.setRetryDelay(new ConstantDelay(Duration.ofMillis(200)));
        c.setMasterConnectionMinimumIdleSize(1);
        c.setMasterConnectionPoolSize(8);
        c.setSlaveConnectionMinimumIdleSize(1);
        c.setSubscriptionConnectionMinimumIdleSize(1);
    }

    private RedissonClient connect(String url) {
        Config config = baseConfig();
        int response = (int) num(args, "response-ms", 3000);
        SingleServerConfig s = config.useSingleServer();
        String address = url;
        // redis://host:port/ or redis://host:port/<db>: Redisson wants no path.
        int slash = address.indexOf('/', "redis://".length() + 1);
        if (address.startsWith("redis") && slash > 0) {
            String db = address.substring(slash + 1);
            address = address.substring(0, slash);
            if (!db.isEmpty()) {
                try {
                    s.setDatabase(Integer.parseInt(db));
                } catch (NumberFormatException e) {
                    throw new Usage("not a database number in " + url);
                }
            }
        }
        s.setAddress(address);
        s.setTimeout(response);
        s.setConnectTimeout(response);
        s.setRetryAttempts(1);
        s.setRetryDelay(new ConstantDelay(Duration.ofMillis(200)));
        s.setConnectionMinimumIdleSize(1);
        s.setConnectionPoolSize(8);
        s.setSubscriptionConnectionMinimumIdleSize(1);
        return Redisson.create(config);
    }

    private int run() {
        String name = args.get("lock");
        String kind = args.getOrDefault("kind", "fenced");
        try {
            file = new FileOutputStream(args.get("history"), true);
        } catch (IOException e) {
            System.err.println("holder: cannot open the history: " + e);
            return 2;
        }
        List<String> urls = new ArrayList<>();
        boolean topology = !args.containsKey("url");
        if ((kind.equals("redlock") || kind.equals("multilock")) && args.containsKey("urls")) {
            urls.addAll(Arrays.asList(args.get("urls").split(",")));
        } else if (!topology) {
            urls.add(args.get("url"));
        }
        List<RedissonClient> clients = new ArrayList<>();
        RedissonClient store = null;
        // A service retries its first connection: a holder started while its link is down (a
        // partition round) keeps trying until --max-secs, as the Rust holder does.
        long connectUntil = now() + num(args, "max-secs", 60) * 1_000_000_000L;
        while (true) {
            try {
                clients.clear();
                store = null;
                if (topology) {
                    clients.add(connectTopology());
                    store = connect(args.get("store"));
                } else {
                    for (String u : urls) {
                        clients.add(connect(u));
                    }
                    String storeUrl = args.getOrDefault("store", args.get("url"));
                    store = storeUrl.equals(urls.get(0)) ? clients.get(0) : connect(storeUrl);
                }
                break;
            } catch (Usage e) {
                System.err.println("holder: " + e.getMessage());
                return 2;
            } catch (Throwable e) {
                for (RedissonClient c : clients) {
                    c.shutdown(0, 1, TimeUnit.SECONDS);
                }
                if (now() > connectUntil) {
                    line("error", "op", "connect", "msg", oneLine(e));
                    return 2;
                }
                // Tried again: not an error of the run (a JVM on a loaded machine may time out
                // its first connect), but on the record.
                line("connect-retry", "msg", oneLine(e));
                sleep(200);
            }
        }
        RedissonClient client = clients.get(0);
        Taker taker;
        switch (kind) {
            case "fenced": taker = new Fenced(client.getFencedLock(name)); break;
            case "rlock": taker = new Single(client.getLock(name), false); break;
            case "fair": taker = new Single(client.getFairLock(name), true); break;
            case "write": taker = new Single(client.getReadWriteLock(name).writeLock(), false); break;
            case "read": taker = new Single(client.getReadWriteLock(name).readLock(), false); break;
            default: {
                RLock[] members = new RLock[clients.size()];
                for (int i = 0; i < members.length; i++) {
                    members[i] = clients.get(i).getLock(name);
                }
                taker = new Multi(members, kind.equals("redlock") ? redLock(client, members)
                        : client.getMultiLock(members), kind.equals("redlock"));
            }
        }
        line("started", "lock", name);
        long holds = holds(taker, store, name, kind.equals("read"));
        line("done", "holds", Long.toString(holds));
        // Forever: exit holding, like the Rust holder (the lease runs out).
        for (RedissonClient c : clients) {
            c.shutdown(0, 2, TimeUnit.SECONDS);
        }
        if (store != client) {
            store.shutdown(0, 2, TimeUnit.SECONDS);
        }
        return 0;
    }

    @SuppressWarnings("deprecation")
    private static RLock redLock(RedissonClient client, RLock[] members) {
        // Deprecated in Redisson (its advice: a plain RLock), still public in 3.x and 4.x.
        return client.getRedLock(members);
    }

    /** RScript's integer reply type: {@code INTEGER} in 3.x, {@code LONG} in 4.x. */
    private static RScript.ReturnType integerReply() {
        for (RScript.ReturnType t : RScript.ReturnType.values()) {
            if (t.name().equals("LONG") || t.name().equals("INTEGER")) {
                return t;
            }
        }
        throw new IllegalStateException("no integer ReturnType in this Redisson");
    }

    private static void sleep(long ms) {
        if (ms <= 0) {
            return;
        }
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Takes holds until done; how many were taken and released. */
    private long holds(Taker lock, RedissonClient store, String name, boolean reader) {
        long iterations = num(args, "iterations", 10);
        boolean forever = num(args, "forever", 0) == 1;
        long hold = num(args, "hold-ms", 0);
        long rmw = num(args, "rmw-ms", 5);
        long gap = num(args, "gap-ms", 0);
        long lease = num(args, "lease-ms", 0);
        String stopFile = args.get("stop-file");
        long deadline = System.nanoTime() + num(args, "max-secs", 60) * 1_000_000_000L;
        RBucket<String> counter = store.getBucket(name + ":counter", StringCodec.INSTANCE);
        RScript script = store.getScript(StringCodec.INSTANCE);
        List<Object> fencedKeys = Arrays.asList(name + ":fenced:max", name + ":fenced:log");
        RScript.ReturnType integer = integerReply();
        String mode = reader ? "read" : "write";

        long holds = 0;
        while (holds < iterations && System.nanoTime() < deadline) {
            if (stopFile != null && Files.exists(Paths.get(stopFile))) {
                break;
            }
            long left = Math.max(0, (deadline - System.nanoTime()) / 1_000_000L);
            Long token;
            try {
                token = lock.take(left, lease);
            } catch (Throwable e) {
                line("error", "op", "acquire", "msg", oneLine(e));
                sleep(50);
                continue;
            }
            if (token == null) {
                break;
            }
            long start = now();
            line("acquired", "lock", name, "start", Long.toString(start), "token", token.toString(),
                    "mode", mode);
            if (forever) {
                // Keep the hold (renewed by Redisson's watchdog) until killed or out of time.
                sleep((deadline - System.nanoTime()) / 1_000_000L);
                break;
            }
            sleep(hold);
            // The deliberately unsafe read-modify-write; a reader reads twice instead.
            String stable = "-";
            String read;
            try {
                String v = counter.get();
                long n = v == null ? 0 : Long.parseLong(v);
                line("read", "lock", name, "value", Long.toString(n));
                sleep(rmw);
                if (reader) {
                    String again = counter.get();
                    stable = (again == null ? 0 : Long.parseLong(again)) == n ? "1" : "0";
                } else {
                    counter.set(Long.toString(n + 1));
                }
                read = Long.toString(n);
            } catch (Throwable e) {
                line("error", "op", "rmw", "msg", oneLine(e));
                read = "-";
            }
            // The same write through the fenced resource (fenced locks only).
            String accepted = "-";
            if (lock.fenced()) {
                try {
                    Object r = script.eval(RScript.Mode.READ_WRITE, FENCED_WRITE, integer, fencedKeys,
                            token.toString(), Long.toString(pid));
                    accepted = String.valueOf(r);
                } catch (Throwable e) {
                    line("error", "op", "fenced", "msg", oneLine(e));
                }
            }
            boolean lost = lock.lost();
            long end = now();
            String lostField = lost ? "1" : "0";
            // Done with the resource: a holder killed during its release has ended its hold here.
            line("releasing", "lock", name, "start", Long.toString(start), "end", Long.toString(end),
                    "read", read, "fenced", accepted, "lost", lostField);
            String unlock;
            try {
                lock.release();
                unlock = "ok";
            } catch (Throwable e) {
                Throwable t = unwrap(e);
                if (t instanceof IllegalMonitorStateException) {
                    unlock = lock.partialRelease() ? "partial" : "lost";
                } else {
                    line("error", "op", "unlock", "msg", oneLine(e));
                    unlock = "error";
                }
            }
            holds++;
            line("released", "lock", name, "start", Long.toString(start), "end", Long.toString(end),
                    "token", token.toString(), "read", read, "mode", mode, "stable", stable,
                    "fenced", accepted, "lost", lostField, "unlock", unlock);
            sleep(gap);
        }
        return holds;
    }

    /** What the hold loop needs from a lock kind. */
    private interface Taker {
        /** Waits at most {@code waitMs}; lease 0 is the watchdog. The token (0 when the kind has
         * none), or null when the wait ran out. */
        Long take(long waitMs, long leaseMs) throws Exception;

        boolean fenced();

        /** Whether the hold is no longer this thread's (asked of the server). */
        boolean lost();

        void release();

        /** An {@link IllegalMonitorStateException} on release means a partial release. */
        default boolean partialRelease() {
            return false;
        }
    }

    /** Whether {@code lock} is still held by this thread; a failed query counts as not held. */
    private boolean held(RLock lock) {
        try {
            return lock.isHeldByCurrentThread();
        } catch (Throwable e) {
            line("error", "op", "held", "msg", oneLine(e));
            return false;
        }
    }

    private final class Fenced implements Taker {
        private final RFencedLock lock;

        Fenced(RFencedLock lock) {
            this.lock = lock;
        }

        @Override
        public Long take(long waitMs, long leaseMs) {
            return leaseMs > 0 ? lock.tryLockAndGetToken(waitMs, leaseMs, MS)
                    : lock.tryLockAndGetToken(waitMs, MS);
        }

        @Override
        public boolean fenced() {
            return true;
        }

        @Override
        public boolean lost() {
            return !held(lock);
        }

        @Override
        public void release() {
            lock.unlock();
        }
    }

    private final class Single implements Taker {
        private final RLock lock;
        /** A fair waiter without a lease queues with the fair-lock wait timeout (a dead one is
         * evicted after it), as the Rust holder does; {@code tryLock(wait)} would queue for the
         * whole wait. */
        private final boolean fair;

        Single(RLock lock, boolean fair) {
            this.lock = lock;
            this.fair = fair;
        }

        @Override
        public Long take(long waitMs, long leaseMs) throws Exception {
            if (leaseMs > 0) {
                return lock.tryLock(waitMs, leaseMs, MS) ? 0L : null;
            }
            if (fair) {
                try {
                    lock.lockAsync().toCompletableFuture().get(waitMs, MS);
                    return 0L;
                } catch (TimeoutException e) {
                    return null;
                }
            }
            return lock.tryLock(waitMs, MS) ? 0L : null;
        }

        @Override
        public boolean fenced() {
            return false;
        }

        @Override
        public boolean lost() {
            return !held(lock);
        }

        @Override
        public void release() {
            lock.unlock();
        }
    }

    /** Redisson's RedLock (a majority of the members) or MultiLock (all of them). */
    private final class Multi implements Taker {
        private final RLock[] members;
        private final RLock lock;
        private final boolean red;

        Multi(RLock[] members, RLock lock, boolean red) {
            this.members = members;
            this.lock = lock;
            this.red = red;
        }

        @Override
        public Long take(long waitMs, long leaseMs) throws Exception {
            boolean got = leaseMs > 0 ? lock.tryLock(waitMs, leaseMs, MS) : lock.tryLock(waitMs, MS);
            return got ? 0L : null;
        }

        @Override
        public boolean fenced() {
            return false;
        }

        /** Redisson answers isHeldByCurrentThread() of these with UnsupportedOperationException:
         * ask each member; a RedLock is lost below a majority, a MultiLock with any member. */
        @Override
        public boolean lost() {
            int held = 0;
            for (RLock m : members) {
                if (held(m)) {
                    held++;
                }
            }
            return red ? held < members.length / 2 + 1 : held < members.length;
        }

        @Override
        public void release() {
            lock.unlock();
        }

        @Override
        public boolean partialRelease() {
            return red;
        }
    }
}
