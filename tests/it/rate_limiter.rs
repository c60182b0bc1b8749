//! `RateLimiter` (Redisson's `RRateLimiter`), Rust side only: the data a Java client reads
//! (hash fields, value and permits keys, the packed take members, TTLs), the window, waiting,
//! `set_rate`, `release`, PER_CLIENT windows, and bad input refused before anything is sent.
//! The Java tier (`tests/it/java/rate_limiter.rs`) shares a limiter with real Redisson.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::support::redisson::now_ms;
use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{LockError, RateType};

/// Generous bound for a wait that should end much sooner.
const WAIT: Duration = Duration::from_secs(20);

/// The takes in a permits ZSET: (id length, permits, score), read as Redisson's
/// `struct.unpack('Bc0I', member)` does (little-endian on every server we run).
async fn takes(raw: &mut MultiplexedConnection, key: &str) -> Vec<(usize, u32, u64)> {
    let members: Vec<(Vec<u8>, f64)> = raw.zrange_withscores(key, 0, -1).await.unwrap();
    members
        .into_iter()
        .map(|(m, score)| {
            let len = usize::from(m[0]);
            assert_eq!(m.len(), 1 + len + 4, "member layout Bc0I: {m:?}");
            let p = u32::from_le_bytes(m[1 + len..].try_into().unwrap());
            (len, p, score as u64)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_is_redissons() {
    let name = "rl:layout";
    let (_server, client, mut raw) = fixture().await;
    let rl = client.get_rate_limiter(name);

    let keep = Duration::from_secs(120);
    assert!(rl
        .try_set_rate(
            redisson_lock::RateLimiterConfig::new(RateType::Overall, 3, Duration::from_secs(60))
                .with_keep_alive(keep)
        )
        .await
        .unwrap());
    assert!(
        !rl.try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::PerClient,
            9,
            Duration::from_secs(1)
        ))
        .await
        .unwrap(),
        "set only once"
    );
    let hash: HashMap<String, String> = raw.hgetall(name).await.unwrap();
    let want: HashMap<String, String> = [
        ("rate", "3"),
        ("interval", "60000"),
        ("type", "0"),
        ("keepAliveTime", "120000"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(hash, want);
    let ttl = pttl(&mut raw, name).await;
    assert!(ttl > 0 && ttl <= 120_000, "keep-alive TTL: {ttl}");
    let config = rl.config().await.unwrap().expect("configured");
    assert_eq!(config.rate_type, RateType::Overall);
    assert_eq!(config.rate, 3);
    assert_eq!(config.interval, Duration::from_secs(60));
    assert_eq!(config.keep_alive, Some(keep));

    assert_eq!(rl.available_permits().await.unwrap(), 3);
    assert_eq!(
        get_str(&mut raw, "{rl:layout}:value").await.as_deref(),
        Some("3")
    );
    let before = now_ms();
    assert!(rl.try_acquire_many(2).await.unwrap());
    let after = now_ms();
    assert_eq!(
        get_str(&mut raw, "{rl:layout}:value").await.as_deref(),
        Some("1")
    );
    let t = takes(&mut raw, "{rl:layout}:permits").await;
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!((t[0].0, t[0].1), (16, 2), "16-byte id, 2 permits");
    assert!(
        before <= t[0].2 && t[0].2 <= after,
        "scored by the taker's clock: {before} <= {} <= {after}",
        t[0].2
    );
    for key in ["{rl:layout}:value", "{rl:layout}:permits"] {
        let ttl = pttl(&mut raw, key).await;
        assert!(
            ttl > 60_000 && ttl <= 120_000,
            "{key} follows keepAliveTime: {ttl}"
        );
    }

    // Not enough left: refused, nothing taken.
    assert!(!rl.try_acquire_many(2).await.unwrap());
    assert_eq!(rl.available_permits().await.unwrap(), 1);
    assert_eq!(takes(&mut raw, "{rl:layout}:permits").await.len(), 1);
    // More than the rate: Redisson's message, nothing taken.
    let e = rl.try_acquire_many(4).await.unwrap_err();
    assert!(e.is_rate_limiter_refused(), "{e:?}");
    assert!(e
        .to_string()
        .contains("Requested permits amount cannot exceed defined rate"));
    assert_eq!(rl.available_permits().await.unwrap(), 1);

    // Release gives one back: the take keeps its score with one permit left.
    rl.release().await.unwrap();
    assert_eq!(rl.available_permits().await.unwrap(), 2);
    let t2 = takes(&mut raw, "{rl:layout}:permits").await;
    assert_eq!(t2.len(), 1, "{t2:?}");
    assert_eq!((t2[0].1, t2[0].2), (1, t[0].2));
    // The value never exceeds the rate.
    rl.release_many(5).await.unwrap();
    assert_eq!(rl.available_permits().await.unwrap(), 3);
    assert!(takes(&mut raw, "{rl:layout}:permits").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_reopens_after_the_interval_and_acquire_waits_for_it() {
    let (_server, client, _raw) = fixture().await;
    let rl = client.get_rate_limiter("rl:window");
    let interval = Duration::from_millis(1500);
    assert!(rl
        .try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            2,
            interval
        ))
        .await
        .unwrap());
    let first = Instant::now();
    assert!(rl.try_acquire_many(2).await.unwrap());
    // A short wait gives up: the window is full for about 1.5 s more.
    assert!(!rl
        .try_acquire_for(Duration::from_millis(100))
        .await
        .unwrap());
    // acquire sleeps the delay the script answers, and gets the permit once the window moved.
    tokio::time::timeout(WAIT, rl.acquire_many(2))
        .await
        .unwrap()
        .unwrap();
    // The limit held: no more than 2 permits in any 1.5 s (less the clocks' ms rounding).
    assert!(
        first.elapsed() >= interval - Duration::from_millis(20),
        "taken after {:?}",
        first.elapsed()
    );
    assert_eq!(rl.available_permits().await.unwrap(), 0);
    // A wait long enough succeeds as well.
    assert!(rl.try_acquire_for(WAIT).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_client_windows_are_separate_and_set_rate_resets() {
    let name = "rl:per-client";
    let (_server, client, mut raw, other) = fixture_with_other().await;
    let a = client.get_rate_limiter(name);
    let b = other.get_rate_limiter(name);
    assert!(a
        .try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::PerClient,
            1,
            Duration::from_secs(60)
        ))
        .await
        .unwrap());
    assert!(a.try_acquire().await.unwrap());
    assert!(!a.try_acquire().await.unwrap());
    assert!(b.try_acquire().await.unwrap(), "b has its own window");
    for c in [&client, &other] {
        let key = format!("{{{name}}}:permits:{}", c.id());
        assert_eq!(takes(&mut raw, &key).await.len(), 1, "{key}");
        let value = format!("{{{name}}}:value:{}", c.id());
        assert_eq!(
            get_str(&mut raw, &value).await.as_deref(),
            Some("0"),
            "{value}"
        );
    }
    assert!(!exists(&mut raw, "{rl:per-client}:value").await);

    // set_rate replaces the configuration and this client's window.
    a.set_rate(redisson_lock::RateLimiterConfig::new(
        RateType::PerClient,
        5,
        Duration::from_secs(10),
    ))
    .await
    .unwrap();
    let c = a.config().await.unwrap().unwrap();
    assert_eq!(
        (c.rate_type, c.rate, c.interval),
        (RateType::PerClient, 5, Duration::from_secs(10))
    );
    assert_eq!(c.keep_alive, None);
    assert_eq!(a.available_permits().await.unwrap(), 5);
    assert_eq!(b.available_permits().await.unwrap(), 0, "b's window kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_anything_is_sent() {
    let (_server, client, mut raw) = fixture().await;
    let rl = client.get_rate_limiter("rl:bad");
    let s = Duration::from_secs(1);
    let bad = [
        rl.try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            0,
            s,
        ))
        .await
        .unwrap_err(),
        rl.try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            1,
            Duration::ZERO,
        ))
        .await
        .unwrap_err(),
        rl.try_set_rate(
            redisson_lock::RateLimiterConfig::new(RateType::Overall, 1, s)
                .with_keep_alive(Duration::from_millis(999)),
        )
        .await
        .unwrap_err(),
        rl.set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            0,
            s,
        ))
        .await
        .unwrap_err(),
    ];
    for e in &bad {
        assert!(matches!(e, LockError::InvalidArgument(_)), "{e:?}");
    }
    assert!(bad[2]
        .to_string()
        .contains("keepAliveTime should be greater than or equal to rateInterval"));
    let empty = client.get_rate_limiter("");
    assert!(empty
        .available_permits()
        .await
        .unwrap_err()
        .is_invalid_argument());

    // Not configured: Redisson's message, and nothing written.
    assert_eq!(rl.config().await.unwrap(), None);
    for e in [
        rl.try_acquire().await.unwrap_err(),
        rl.available_permits().await.unwrap_err(),
        rl.release().await.unwrap_err(),
    ] {
        assert!(e.is_rate_limiter_refused(), "{e:?}");
        assert!(
            e.to_string().contains("RateLimiter is not initialized"),
            "{e}"
        );
    }
    let keys: Vec<String> = raw.keys("*").await.unwrap();
    assert!(keys.is_empty(), "nothing written: {keys:?}");
    // A keep-alive equal to the interval is accepted.
    assert!(rl
        .try_set_rate(
            redisson_lock::RateLimiterConfig::new(RateType::Overall, 1, s).with_keep_alive(s)
        )
        .await
        .unwrap());
}

/// `delete` and the `RExpirable` trio cover every key Redisson's `delete`/`expire` name: the
/// configuration, the OVERALL value and takes, and this client's PER_CLIENT value and takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_expiry_cover_every_key() {
    use redisson_lock::{KeyTtl, RateLimiterConfig};
    let name = "rl:ttl";
    let (_server, client, mut raw) = fixture().await;
    let rl = client.get_rate_limiter(name);
    let window = Duration::from_secs(60);
    assert_eq!(rl.remain_time_to_live().await.unwrap(), KeyTtl::NoKey);
    assert!(!rl.expire(window).await.unwrap(), "nothing to expire yet");
    rl.try_set_rate(RateLimiterConfig::new(RateType::Overall, 5, window))
        .await
        .unwrap();
    assert!(rl.try_acquire().await.unwrap());
    // A PER_CLIENT window next to the OVERALL one: five keys in all.
    rl.set_rate(RateLimiterConfig::new(RateType::PerClient, 5, window))
        .await
        .unwrap();
    assert!(rl.try_acquire_many(2).await.unwrap());
    let mut keys: Vec<String> = raw.keys(format!("*{name}*")).await.unwrap();
    keys.sort();
    assert_eq!(keys.len(), 5, "{keys:?}");
    for k in &keys {
        assert_eq!(pttl(&mut raw, k).await, -1, "{k} has no TTL yet");
    }

    assert!(rl.expire(Duration::from_secs(3600)).await.unwrap());
    for k in &keys {
        let t = pttl(&mut raw, k).await;
        assert!(t > 0 && t <= 3_600_000, "{k}: {t}");
    }
    assert!(matches!(
        rl.remain_time_to_live().await.unwrap(),
        KeyTtl::Expires(d) if d <= Duration::from_secs(3600)
    ));
    assert!(rl.clear_expire().await.unwrap());
    for k in &keys {
        assert_eq!(pttl(&mut raw, k).await, -1, "{k} kept a TTL");
    }
    assert_eq!(rl.remain_time_to_live().await.unwrap(), KeyTtl::NoExpiry);
    let e = rl.expire(Duration::ZERO).await.unwrap_err();
    assert!(matches!(e, LockError::InvalidArgument(_)), "{e:?}");

    assert!(rl.delete().await.unwrap());
    let left: Vec<String> = raw.keys(format!("*{name}*")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert!(!rl.delete().await.unwrap(), "nothing left to delete");
    assert_eq!(rl.config().await.unwrap(), None);
    let e = rl.try_acquire().await.unwrap_err();
    assert!(matches!(e, LockError::RateLimiter { .. }), "{e:?}");
}
