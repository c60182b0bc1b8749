import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The machine's true CLOCK_MONOTONIC for a JVM under libfaketime, which fakes the clock the JVM
 * reads ({@code System.nanoTime()} goes through libc's {@code clock_gettime}). This asks the
 * kernel through libc's {@code syscall(2)}, which libfaketime leaves alone, as the Rust holder
 * does. Java 22+ (the foreign-function API): {@code scripts/ensure-java} compiles it apart from
 * the peer (which stays Java 17) when such a JDK is installed; the Java holder loads it by name
 * when it runs under libfaketime ({@code --enable-native-access=ALL-UNNAMED}).
 */
public final class TrueClock {
    private static final int CLOCK_MONOTONIC = 1;
    private static final long SYS_CLOCK_GETTIME =
            System.getProperty("os.arch").equals("aarch64") ? 113 : 228;
    private static final MethodHandle SYSCALL;

    static {
        Linker linker = Linker.nativeLinker();
        SYSCALL = linker.downcallHandle(
                linker.defaultLookup().find("syscall").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_LONG, ValueLayout.ADDRESS),
                Linker.Option.firstVariadicArg(1));
    }

    private TrueClock() {}

    /** CLOCK_MONOTONIC in nanoseconds, from the kernel. */
    public static long nanos() throws Throwable {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ts = arena.allocate(16, 8);
            long r = (long) SYSCALL.invokeExact(SYS_CLOCK_GETTIME, (long) CLOCK_MONOTONIC, ts);
            if (r != 0) {
                throw new IllegalStateException("clock_gettime(CLOCK_MONOTONIC) failed: " + r);
            }
            return ts.get(ValueLayout.JAVA_LONG, 0) * 1_000_000_000L
                    + ts.get(ValueLayout.JAVA_LONG, 8);
        }
    }
}
