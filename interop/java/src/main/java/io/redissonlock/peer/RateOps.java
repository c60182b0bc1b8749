package io.redissonlock.peer;

import java.time.Duration;
import java.util.List;

import org.redisson.api.RRateLimiter;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;

/**
 * The rate limiter's ops ({@code rl.*}, interop/java/README.md): RRateLimiter's trySetRate (with
 * keepAliveTime), tryAcquire, availablePermits and getConfig. Kept out of {@link Ops} so that
 * peer ops added elsewhere merge without conflicts.
 */
final class RateOps {
    private RateOps() {}

    static boolean handles(String op) {
        return op.startsWith("rl.");
    }

    static String run(RedissonClient client, String op, List<String> a) {
        RRateLimiter rl = client.getRateLimiter(arg(a, 0, "name"));
        switch (op) {
            case "rl.trysetrate": {
                RateType type = RateType.valueOf(arg(a, 1, "type"));
                long rate = num(a, 2, "rate");
                Duration interval = Duration.ofMillis(num(a, 3, "intervalMs"));
                Duration keep = Duration.ofMillis(a.size() > 4 ? num(a, 4, "keepAliveMs") : 0);
                return Boolean.toString(rl.trySetRate(type, rate, interval, keep));
            }
            case "rl.tryacquire":
                return Boolean.toString(rl.tryAcquire(num(a, 1, "permits"),
                        Duration.ofMillis(num(a, 2, "waitMs"))));
            case "rl.available":
                return Long.toString(rl.availablePermits());
            case "rl.config": {
                RateLimiterConfig c = rl.getConfig();
                return c.getRateType() + " " + c.getRate() + " " + c.getRateInterval();
            }
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    private static String arg(List<String> a, int i, String what) {
        if (i >= a.size()) {
            throw new IllegalArgumentException("missing " + what);
        }
        return a.get(i);
    }

    private static long num(List<String> a, int i, String what) {
        try {
            return Long.parseLong(arg(a, i, what));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a number: " + what);
        }
    }
}
