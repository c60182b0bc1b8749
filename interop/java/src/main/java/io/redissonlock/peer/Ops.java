package io.redissonlock.peer;

import java.lang.reflect.InvocationTargetException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RExpirable;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * The operations of the peer (README.md lists them). Each runs on its owner's thread and
 * returns the reply's value; any exception becomes an {@code err} reply.
 */
final class Ops {
    private static final TimeUnit MS = TimeUnit.MILLISECONDS;

    private final RedissonClient client;

    Ops(RedissonClient client) {
        this.client = client;
    }

    /** Thrown for a malformed command; replied as {@code err IllegalArgumentException}. */
    private static IllegalArgumentException bad(String what) {
        return new IllegalArgumentException(what);
    }

    private static String arg(List<String> args, int i, String what) {
        if (i >= args.size()) {
            throw bad("missing argument " + (i + 1) + " (" + what + ")");
        }
        return args.get(i);
    }

    private static long num(List<String> args, int i, String what) {
        String s = arg(args, i, what);
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw bad(what + ": not a number: " + s);
        }
    }

    private static int int32(List<String> args, int i, String what) {
        long v = num(args, i, what);
        if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
            throw bad(what + ": out of range: " + v);
        }
        return (int) v;
    }

    private static String str(Object o) {
        return o == null ? "null" : o.toString();
    }

    /** The lock object of {@code <kind> <name>}. */
    RLock lock(String kind, String name) {
        switch (kind) {
            case "lock": return client.getLock(name);
            case "fair": return client.getFairLock(name);
            case "read": return client.getReadWriteLock(name).readLock();
            case "write": return client.getReadWriteLock(name).writeLock();
            case "fenced": return client.getFencedLock(name);
            case "spin": return client.getSpinLock(name);
            case "nrlock": return since44("getNonReentrantLock", name);
            case "nrfair": return since44("getNonReentrantFairLock", name);
            case "multi": return client.getMultiLock(members(name));
            case "redlock": return redLock(members(name));
            default: throw bad("unknown lock kind " + kind);
        }
    }

    /**
     * A lock factory of Redisson 4.4+, called by name so that one source still compiles
     * against 3.x: there it answers {@code err UnsupportedOperationException}.
     */
    private RLock since44(String factory, String name) {
        try {
            return (RLock) RedissonClient.class.getMethod(factory, String.class).invoke(client, name);
        } catch (NoSuchMethodException e) {
            throw new UnsupportedOperationException(factory + " needs Redisson 4.4+");
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            throw cause instanceof RuntimeException ? (RuntimeException) cause : new IllegalStateException(cause);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    private RLock[] members(String names) {
        String[] parts = names.split(",");
        RLock[] locks = new RLock[parts.length];
        for (int i = 0; i < parts.length; i++) {
            locks[i] = client.getLock(parts[i]);
        }
        return locks;
    }

    @SuppressWarnings("deprecation")
    private RLock redLock(RLock[] locks) {
        // Deprecated in Redisson (its own advice is a plain RLock), still public in 3.x and 4.x.
        return client.getRedLock(locks);
    }

    private RFencedLock fenced(String kind, String name) {
        if (!kind.equals("fenced")) {
            throw bad("not a fenced lock: " + kind);
        }
        return client.getFencedLock(name);
    }

    String run(String op, List<String> a) throws Exception {
        switch (op) {
            case "tid":
                return Long.toString(Thread.currentThread().getId());
            case "lock": {
                String kind = arg(a, 0, "kind");
                String name = arg(a, 1, "name");
                long lease = num(a, 2, "leaseMs");
                if (kind.equals("fenced")) {
                    RFencedLock l = fenced(kind, name);
                    return str(lease < 0 ? l.lockAndGetToken() : l.lockAndGetToken(lease, MS));
                }
                RLock l = lock(kind, name);
                if (lease < 0) {
                    l.lock();
                } else {
                    l.lock(lease, MS);
                }
                return "null";
            }
            case "trylock": {
                String kind = arg(a, 0, "kind");
                String name = arg(a, 1, "name");
                long wait = num(a, 2, "waitMs");
                long lease = num(a, 3, "leaseMs");
                if (kind.equals("fenced")) {
                    RFencedLock l = fenced(kind, name);
                    if (lease >= 0) {
                        return str(l.tryLockAndGetToken(wait, lease, MS));
                    }
                    return str(wait == 0 ? l.tryLockAndGetToken() : l.tryLockAndGetToken(wait, MS));
                }
                RLock l = lock(kind, name);
                if (lease >= 0) {
                    return Boolean.toString(l.tryLock(wait, lease, MS));
                }
                return Boolean.toString(wait == 0 ? l.tryLock() : l.tryLock(wait, MS));
            }
            case "unlock":
                lock(arg(a, 0, "kind"), arg(a, 1, "name")).unlock();
                return "true";
            case "forceunlock":
                return Boolean.toString(lock(arg(a, 0, "kind"), arg(a, 1, "name")).forceUnlock());
            case "islocked":
                return Boolean.toString(lock(arg(a, 0, "kind"), arg(a, 1, "name")).isLocked());
            case "held":
                return Boolean.toString(lock(arg(a, 0, "kind"), arg(a, 1, "name")).isHeldByCurrentThread());
            case "heldby":
                return Boolean.toString(lock(arg(a, 0, "kind"), arg(a, 1, "name"))
                        .isHeldByThread(num(a, 2, "threadId")));
            case "holdcount":
                return Integer.toString(lock(arg(a, 0, "kind"), arg(a, 1, "name")).getHoldCount());
            case "ttl":
                return Long.toString(lock(arg(a, 0, "kind"), arg(a, 1, "name")).remainTimeToLive());
            case "token":
                return str(fenced(arg(a, 0, "kind"), arg(a, 1, "name")).getToken());
            case "contend":
                return contend(arg(a, 0, "kind"), arg(a, 1, "name"), arg(a, 2, "counterKey"),
                        num(a, 3, "durationMs"), num(a, 4, "holdMs"));
            case "frames":
                return frames(arg(a, 0, "owner"));
            default:
                if (RateOps.handles(op)) {
                    return RateOps.run(client, op, a);
                }
                return Sync.run(client, op, a);
        }
    }

    /**
     * The stack of owner {@code owner}'s thread, top first, as {@code SimpleClass.method} frames
     * joined by commas ({@code -} when that owner has no thread yet): tells a test where a
     * blocked call waits (e.g. {@code Semaphore.tryAcquire}: parked on Redisson's latch, no
     * longer on a reply).
     */
    private static String frames(String owner) {
        for (java.util.Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            if (!e.getKey().getName().equals("owner-" + owner)) {
                continue;
            }
            List<String> out = new ArrayList<>();
            for (StackTraceElement f : e.getValue()) {
                String cls = f.getClassName();
                out.add(cls.substring(cls.lastIndexOf('.') + 1) + "." + f.getMethodName());
            }
            return out.isEmpty() ? "-" : String.join(",", out);
        }
        return "-";
    }

    /**
     * Until {@code durationMs} passes: lock (watchdog), GET the counter, sleep, SET it one
     * higher, unlock; each hold's interval on System.nanoTime() (CLOCK_MONOTONIC on Linux).
     */
    private String contend(String kind, String name, String counterKey, long durationMs, long holdMs)
            throws InterruptedException {
        RLock l = lock(kind, name);
        RBucket<String> counter = client.getBucket(counterKey, StringCodec.INSTANCE);
        long end = System.nanoTime() + durationMs * 1_000_000L;
        List<String> spans = new ArrayList<>();
        while (System.nanoTime() < end) {
            l.lock();
            long t0 = System.nanoTime();
            String v = counter.get();
            long n = v == null ? 0 : Long.parseLong(v);
            Thread.sleep(holdMs);
            counter.set(Long.toString(n + 1));
            long t1 = System.nanoTime();
            l.unlock();
            spans.add(t0 + ":" + t1);
        }
        return spans.size() + " " + (spans.isEmpty() ? "-" : String.join(",", spans));
    }

    /** The synchronizers: semaphore, permit-expirable semaphore, count-down latch. */
    static final class Sync {
        private Sync() {}

        @SuppressWarnings("unchecked")
        static String run(RedissonClient client, String op, List<String> a) throws Exception {
            switch (op) {
                case "sem.trysetpermits":
                    return Boolean.toString(sem(client, a).trySetPermits(int32(a, 1, "permits")));
                case "sem.acquire":
                    sem(client, a).acquire(int32(a, 1, "permits"));
                    return "true";
                case "sem.tryacquire":
                    return Boolean.toString(sem(client, a).tryAcquire(int32(a, 1, "permits"),
                            num(a, 2, "waitMs"), MS));
                case "sem.release":
                    sem(client, a).release(int32(a, 1, "permits"));
                    return "true";
                case "sem.available":
                    return Integer.toString(sem(client, a).availablePermits());
                case "sem.trysetpermitsttl":
                    // trySetPermits(int, Duration): called by name (not in every 3.x).
                    return str(call(sem(client, a), "trySetPermits",
                            new Class<?>[] {int.class, Duration.class},
                            int32(a, 1, "permits"), Duration.ofMillis(num(a, 2, "ttlMs"))));
                case "sem.releaseifexists":
                    return str(call(sem(client, a), "releaseIfExists",
                            new Class<?>[] {int.class}, int32(a, 1, "permits")));
                case "expire":
                    return Boolean.toString(expirable(client, a).expire(Duration.ofMillis(num(a, 2, "ttlMs"))));
                case "clearexpire":
                    return Boolean.toString(expirable(client, a).clearExpire());
                case "remainttl":
                    return Long.toString(expirable(client, a).remainTimeToLive());
                case "pes.trysetpermits":
                    return Boolean.toString(pes(client, a).trySetPermits(int32(a, 1, "permits")));
                case "pes.acquire": {
                    long lease = num(a, 1, "leaseMs");
                    RPermitExpirableSemaphore s = pes(client, a);
                    return lease < 0 ? s.acquire() : s.acquire(lease, MS);
                }
                case "pes.tryacquire": {
                    long wait = num(a, 1, "waitMs");
                    long lease = num(a, 2, "leaseMs");
                    RPermitExpirableSemaphore s = pes(client, a);
                    return str(lease < 0 ? s.tryAcquire(wait, MS) : s.tryAcquire(wait, lease, MS));
                }
                case "pes.release":
                    pes(client, a).release(arg(a, 1, "permitId"));
                    return "true";
                case "pes.tryrelease":
                    return Boolean.toString(pes(client, a).tryRelease(arg(a, 1, "permitId")));
                case "pes.available":
                    return Integer.toString(pes(client, a).availablePermits());
                // Newer RPermitExpirableSemaphore methods, called by name (not in every 3.x).
                case "pes.getpermits":
                    return str(call(pes(client, a), "getPermits", new Class<?>[0]));
                case "pes.acquired":
                    return str(call(pes(client, a), "acquiredPermits", new Class<?>[0]));
                case "pes.setpermits":
                    call(pes(client, a), "setPermits", new Class<?>[] {int.class}, int32(a, 1, "permits"));
                    return "true";
                case "pes.leasetime":
                    return str(call(pes(client, a), "getLeaseTime", new Class<?>[] {String.class},
                            arg(a, 1, "permitId")));
                case "pes.acquiremany": {
                    // acquire(permits, leaseTime, unit): several ids at once.
                    Object ids = call(pes(client, a), "acquire",
                            new Class<?>[] {int.class, long.class, TimeUnit.class},
                            int32(a, 1, "permits"), num(a, 2, "leaseMs"), MS);
                    return String.join(",", (List<String>) ids);
                }
                case "pes.releasemany":
                    call(pes(client, a), "release", new Class<?>[] {List.class}, ids(a));
                    return "true";
                case "pes.tryreleasemany":
                    return str(call(pes(client, a), "tryRelease", new Class<?>[] {List.class}, ids(a)));
                case "latch.trysetcount":
                    return Boolean.toString(latch(client, a).trySetCount(num(a, 1, "count")));
                case "latch.countdown":
                    latch(client, a).countDown();
                    return "true";
                case "latch.await":
                    return Boolean.toString(latch(client, a).await(num(a, 1, "waitMs"), MS));
                case "latch.count":
                    return Long.toString(latch(client, a).getCount());
                default:
                    throw bad("unknown op " + op);
            }
        }

        /**
         * {@code <sync> <name>}: {@code sem} or {@code pes} (Redisson's RCountDownLatch is not
         * an RExpirable).
         */
        private static RExpirable expirable(RedissonClient client, List<String> a) {
            String sync = arg(a, 0, "sync");
            String name = arg(a, 1, "name");
            switch (sync) {
                case "sem": return client.getSemaphore(name);
                case "pes": return client.getPermitExpirableSemaphore(name);
                default: throw bad("not an RExpirable synchronizer: " + sync);
            }
        }

        /**
         * A method newer than some pinned Redisson, called by name so that one source compiles
         * against every version: where it is missing, {@code err UnsupportedOperationException}.
         */
        private static Object call(Object target, String method, Class<?>[] types, Object... args)
                throws Exception {
            java.lang.reflect.Method m;
            try {
                m = target.getClass().getMethod(method, types);
            } catch (NoSuchMethodException e) {
                throw new UnsupportedOperationException(method + " is not in this Redisson");
            }
            try {
                return m.invoke(target, args);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                throw cause instanceof Exception ? (Exception) cause : new IllegalStateException(cause);
            }
        }

        /** Argument 2: comma-separated permit ids. */
        private static List<String> ids(List<String> a) {
            return java.util.Arrays.asList(arg(a, 1, "permitIds").split(","));
        }

        private static RSemaphore sem(RedissonClient client, List<String> a) {
            return client.getSemaphore(arg(a, 0, "name"));
        }

        private static RPermitExpirableSemaphore pes(RedissonClient client, List<String> a) {
            return client.getPermitExpirableSemaphore(arg(a, 0, "name"));
        }

        private static RCountDownLatch latch(RedissonClient client, List<String> a) {
            return client.getCountDownLatch(arg(a, 0, "name"));
        }
    }
}
