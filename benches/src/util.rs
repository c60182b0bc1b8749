//! Clocks, percentiles, process counters and a tiny random source: nothing here talks to Redis.

use std::time::Duration;

/// CLOCK_MONOTONIC in nanoseconds: comparable across the processes of one machine (W3, W3w).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This process's CPU time (user + system), in nanoseconds.
pub fn cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is a valid value to be overwritten by getrusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Resident set size of this process in bytes (`VmRSS`), 0 if unknown.
/// The process's allocator, counting the bytes currently allocated: unlike RSS, which keeps the
/// high-water mark of transient allocations (glibc does not give freed memory back), the live
/// count says what parked waiters actually hold.
pub struct Counting;

static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Allocations made (`alloc` and `realloc` calls), for allocations per cycle.
static ALLOCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = unsafe { std::alloc::System.alloc(layout) };
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), std::sync::atomic::Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), std::sync::atomic::Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !p.is_null() {
            LIVE.fetch_add(new_size, std::sync::atomic::Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), std::sync::atomic::Ordering::Relaxed);
        }
        p
    }
}

/// Heap bytes allocated now (through [`Counting`]).
pub fn live_heap_bytes() -> u64 {
    LIVE.load(std::sync::atomic::Ordering::Relaxed) as u64
}

/// Allocations made so far by the whole process (through [`Counting`]).
pub fn allocations() -> u64 {
    ALLOCS.load(std::sync::atomic::Ordering::Relaxed)
}

pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Nearest-rank percentile of an ascending slice (`p` in 0..=100); 0 for an empty slice.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median of values (mean of the middle two for an even count); NaN when empty.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if !n.is_multiple_of(2) {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// xorshift64*: enough randomness for hold times, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = (hi - lo).as_nanos() as u64 + 1;
        lo + Duration::from_nanos(self.next_u64() % span)
    }
}

/// Sleeps until the monotonic clock reads `at_ns` (returns at once if it has passed).
pub async fn sleep_until_ns(at_ns: u64) {
    let now = now_ns();
    if at_ns > now {
        tokio::time::sleep(Duration::from_nanos(at_ns - now)).await;
    }
}

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 50.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn rng_stays_in_range() {
        let mut r = Rng::new(42);
        for _ in 0..1000 {
            let d = r.between(Duration::from_millis(450), Duration::from_millis(650));
            assert!(d >= Duration::from_millis(450) && d <= Duration::from_millis(650));
        }
    }
}
