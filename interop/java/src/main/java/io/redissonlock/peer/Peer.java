package io.redissonlock.peer;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.TrustManagerFactory;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ConstantDelay;
import org.redisson.config.ReadMode;
import org.redisson.config.SentinelServersConfig;
import org.redisson.config.SingleServerConfig;

/**
 * The Java Redisson peer of the interop tests: one {@link RedissonClient} (so one UUID) driven
 * by commands read on stdin, one per line, {@code <id> <owner> <op> <args...>}. Each distinct
 * owner is one real Java thread (a single-thread executor), so re-entry and thread ownership
 * are Redisson's own. Replies are whole lines on stdout: {@code <id> ok <value>} or
 * {@code <id> err <ExceptionSimpleName> <message>}. The protocol is in README.md.
 */
public final class Peer {
    private static final PrintStream OUT =
            new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);

    private final RedissonClient client;
    private final Ops ops;
    private final Map<String, ExecutorService> owners = new ConcurrentHashMap<>();

    private Peer(RedissonClient client) {
        this.client = client;
        this.ops = new Ops(client);
    }

    /** Writes one whole line to stdout (lines of different owners never interleave). */
    static void line(String s) {
        synchronized (OUT) {
            OUT.print(s);
            OUT.print('\n');
            OUT.flush();
        }
    }

    public static void main(String[] args) {
        Config config;
        try {
            config = config(args);
        } catch (IllegalArgumentException e) {
            System.err.println("redisson-peer: " + e.getMessage());
            System.err.println("usage: --mode single|cluster|sentinel --address url[,url...] "
                    + "[--master NAME] [--watchdog-ms N]");
            System.exit(2);
            return;
        }
        RedissonClient client;
        String uuid;
        try {
            client = Redisson.create(config);
            uuid = probeUuid(client);
        } catch (Throwable e) {
            System.err.println("redisson-peer: cannot connect: " + e);
            System.exit(1);
            return;
        }
        line("ready " + uuid);
        new Peer(client).serve();
    }

    /** The Redisson config from the command line. */
    static Config config(String[] args) {
        String mode = "single";
        String address = null;
        String master = null;
        Long watchdogMs = null;
        String tlsCa = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException("missing value after " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--mode": mode = v; break;
                case "--address": address = v; break;
                case "--master": master = v; break;
                case "--tls-ca": tlsCa = v; break;
                case "--watchdog-ms":
                    try {
                        watchdogMs = Long.parseLong(v);
                    } catch (NumberFormatException e) {
                        throw new IllegalArgumentException("--watchdog-ms: not a number: " + v);
                    }
                    break;
                default: throw new IllegalArgumentException("unknown option " + a);
            }
        }
        if (address == null) {
            throw new IllegalArgumentException("--address is required");
        }
        String[] urls = address.split(",");
        Config config = new Config();
        // Few threads: the peer runs beside the tests on a small machine.
        config.setThreads(4);
        config.setNettyThreads(8);
        if (watchdogMs != null) {
            config.setLockWatchdogTimeout(watchdogMs);
        }
        // A dead server gives an error within seconds: short timeouts, one retry.
        int timeoutMs = 3000;
        int connectMs = 3000;
        int retries = 1;
        ConstantDelay retryDelay = new ConstantDelay(Duration.ofMillis(200));
        switch (mode) {
            case "single": {
                SingleServerConfig s = config.useSingleServer();
                s.setAddress(urls[0]);
                s.setTimeout(timeoutMs);
                s.setConnectTimeout(connectMs);
                s.setRetryAttempts(retries);
                s.setRetryDelay(retryDelay);
                s.setConnectionMinimumIdleSize(2);
                s.setConnectionPoolSize(32);
                s.setSubscriptionConnectionMinimumIdleSize(1);
                if (tlsCa != null) {
                    // rediss:// URLs; the server certificate must chain to this CA (PEM) and
                    // name the host (Redisson's default, strict verification).
                    s.setSslTrustManagerFactory(trustOnly(tlsCa));
                }
                break;
            }
            case "cluster": {
                // Sharded pub/sub stays AUTO, Redisson's default.
                ClusterServersConfig c = config.useClusterServers();
                c.addNodeAddress(urls);
                c.setTimeout(timeoutMs);
                c.setConnectTimeout(connectMs);
                c.setRetryAttempts(retries);
                c.setRetryDelay(retryDelay);
                // Queries read the master: the tests compare answers with what the master holds.
                c.setReadMode(ReadMode.MASTER);
                c.setMasterConnectionMinimumIdleSize(2);
                c.setMasterConnectionPoolSize(32);
                c.setSlaveConnectionMinimumIdleSize(1);
                c.setSubscriptionConnectionMinimumIdleSize(1);
                break;
            }
            case "sentinel": {
                if (master == null) {
                    throw new IllegalArgumentException("--mode sentinel needs --master NAME");
                }
                SentinelServersConfig s = config.useSentinelServers();
                s.setMasterName(master);
                s.addSentinelAddress(urls);
                s.setCheckSentinelsList(false);
                s.setTimeout(timeoutMs);
                s.setConnectTimeout(connectMs);
                s.setRetryAttempts(retries);
                s.setRetryDelay(retryDelay);
                s.setReadMode(ReadMode.MASTER);
                s.setMasterConnectionMinimumIdleSize(2);
                s.setMasterConnectionPoolSize(32);
                s.setSlaveConnectionMinimumIdleSize(1);
                s.setSubscriptionConnectionMinimumIdleSize(1);
                break;
            }
            default:
                throw new IllegalArgumentException("unknown --mode " + mode);
        }
        return config;
    }

    /** A trust manager factory that trusts only the CA certificates of a PEM file. */
    static TrustManagerFactory trustOnly(String pemFile) {
        try (InputStream in = new FileInputStream(pemFile)) {
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int i = 0;
            for (Certificate ca : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                store.setCertificateEntry("ca-" + i++, ca);
            }
            if (i == 0) {
                throw new IllegalArgumentException("--tls-ca: no certificate in " + pemFile);
            }
            TrustManagerFactory tmf =
                    TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(store);
            return tmf;
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalArgumentException("--tls-ca " + pemFile + ": " + e, e);
        }
    }

    /**
     * The client's UUID through the public API only: a probe thread locks a scratch lock, the
     * hash's one field is {@code <uuid>:<thread id>}; then it unlocks and deletes the key.
     */
    static String probeUuid(RedissonClient client) throws Exception {
        String name = "redisson-peer:probe:" + UUID.randomUUID();
        String[] out = new String[1];
        Exception[] failed = new Exception[1];
        Thread probe = new Thread(() -> {
            RLock lock = client.getLock(name);
            try {
                lock.lock(60, TimeUnit.SECONDS);
                try {
                    Set<String> fields = client.<String, String>getMap(name, StringCodec.INSTANCE).readAllKeySet();
                    String suffix = ":" + Thread.currentThread().getId();
                    for (String f : fields) {
                        if (f.endsWith(suffix)) {
                            out[0] = f.substring(0, f.length() - suffix.length());
                        }
                    }
                } finally {
                    lock.unlock();
                }
            } catch (Exception e) {
                failed[0] = e;
            } finally {
                client.getKeys().delete(name);
            }
        }, "probe");
        probe.start();
        probe.join();
        if (failed[0] != null) {
            throw failed[0];
        }
        if (out[0] == null) {
            throw new IllegalStateException("probe lock held no field of this thread");
        }
        return out[0];
    }

    /** Reads commands until `exit` or EOF. */
    private void serve() {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            String raw;
            while ((raw = in.readLine()) != null) {
                String text = raw.trim();
                if (text.isEmpty()) {
                    continue;
                }
                List<String> tokens = new ArrayList<>(Arrays.asList(text.split("\\s+")));
                if (tokens.size() < 3) {
                    line(tokens.get(0) + " err IllegalArgumentException expected <id> <owner> <op> <args...>");
                    continue;
                }
                String id = tokens.get(0);
                String owner = tokens.get(1);
                String op = tokens.get(2);
                List<String> rest = tokens.subList(3, tokens.size());
                if (op.equals("exit")) {
                    line(id + " ok true");
                    break;
                }
                ExecutorService thread = owners.computeIfAbsent(owner, o -> Executors.newSingleThreadExecutor(r -> {
                    Thread t = new Thread(r, "owner-" + o);
                    t.setDaemon(true);
                    return t;
                }));
                thread.execute(() -> run(id, op, rest));
            }
        } catch (Throwable e) {
            System.err.println("redisson-peer: stdin: " + e);
        }
        shutdown();
    }

    private void run(String id, String op, List<String> args) {
        String reply;
        try {
            reply = id + " ok " + ops.run(op, args);
        } catch (Throwable e) {
            Throwable t = e;
            // Redisson surfaces some failures wrapped; name the one that says what happened.
            if (t instanceof java.util.concurrent.CompletionException && t.getCause() != null) {
                t = t.getCause();
            }
            String msg = String.valueOf(t.getMessage()).replace('\n', ' ').replace('\r', ' ');
            reply = id + " err " + t.getClass().getSimpleName() + " " + msg;
        }
        line(reply);
    }

    private void shutdown() {
        for (ExecutorService e : owners.values()) {
            e.shutdownNow();
        }
        try {
            client.shutdown(0, 2, TimeUnit.SECONDS);
        } catch (Throwable e) {
            System.err.println("redisson-peer: shutdown: " + e);
        }
        System.exit(0);
    }
}
