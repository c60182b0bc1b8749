//! Area 3 of issue 31: `FencedValue`'s rule at the edges of the token space.
//!
//! The rule, as documented on [`FencedValue`](redisson_lock::FencedValue): a write is accepted
//! only with a token *at least as great as* the greatest that wrote the value before (equal
//! tokens are accepted: one holder may write as often as it likes with its token), and the
//! first fenced write of a value is accepted whatever its token. Tokens are `i64` (what
//! Redisson's fenced lock mints with `INCR`), at least 1.
//!
//! The rule must hold for every pair of tokens, so it is checked where a realistic bug breaks
//! it: across digit-count boundaries (9/10, 99/100, ...: a string comparison), at equal tokens
//! (`>` for `>=`), around 2^53 and i64::MAX (Lua numbers are doubles: a `tonumber` comparison
//! makes neighbours equal there), with no previous token, and in what is stored as the fence
//! (the exact decimal token, which [`last_token`](redisson_lock::FencedValue::last_token)
//! reads back). Then against a model, with generated token sequences (`proptest`) on one real
//! server, and with tokens minted by Java Redisson's `RFencedLock` at the same edges.

use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config as PropConfig, TestCaseError, TestRunner};
use redis::AsyncCommands;
use redisson_lock::{Client, FencedValue, LockOwner};

use crate::java::peers;
use crate::support::*;

/// 2^53: the first integer a Lua number (a double) cannot tell from its successor.
const P53: i64 = 1 << 53;

/// What the server holds for `value`: (its value, its fence), both as raw strings.
async fn held(
    raw: &mut redis::aio::MultiplexedConnection,
    value: &FencedValue,
) -> [Option<String>; 2] {
    [
        get_str(raw, value.key()).await,
        get_str(raw, value.fence_key()).await,
    ]
}

/// Writes `first` then `second` to a fresh value `key`; the second must be accepted exactly
/// when `second >= first`. Checks what the server holds after each write: the value written
/// last by an accepted write, and the fence as the exact decimal of the greatest token.
async fn pair(
    client: &Client,
    raw: &mut redis::aio::MultiplexedConnection,
    key: &str,
    first: i64,
    second: i64,
) {
    let what = format!("{key}: {first} then {second}");
    let value = client.get_fenced_value(key);
    assert!(
        value.set(first, "first").await.unwrap(),
        "{what}: the first fenced write was refused"
    );
    assert_eq!(
        held(raw, &value).await,
        [Some("first".to_owned()), Some(first.to_string())],
        "{what}: after the first write"
    );
    assert_eq!(value.last_token().await.unwrap(), Some(first), "{what}");
    let accepted = value.set(second, "second").await.unwrap();
    assert_eq!(accepted, second >= first, "{what}: accepted = {accepted}");
    let (v, t) = if second >= first {
        ("second", second)
    } else {
        ("first", first)
    };
    assert_eq!(
        held(raw, &value).await,
        [Some(v.to_owned()), Some(t.to_string())],
        "{what}: after the second write"
    );
    assert_eq!(value.last_token().await.unwrap(), Some(t), "{what}");
}

/// Every ordered pair of `tokens` (the diagonal included) on fresh values.
async fn all_pairs(
    client: &Client,
    raw: &mut redis::aio::MultiplexedConnection,
    tag: &str,
    tokens: &[i64],
) {
    for (i, &a) in tokens.iter().enumerate() {
        for (j, &b) in tokens.iter().enumerate() {
            pair(client, raw, &format!("fe:{tag}:{i}:{j}"), a, b).await;
        }
    }
}

/// Across digit-count boundaries, where a string comparison orders "10" before "9" and "100"
/// before "99": each neighbour pair both ways, and equal tokens (accepted, per the doc).
/// Bugs: comparing the tokens as strings; `>` for `>=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_holds_across_digit_count_boundaries() {
    let (_server, client, mut raw) = fixture().await;
    for (k, edge) in [10i64, 100, 1000, 10_000_000_000, 1_000_000_000_000_000_000]
        .into_iter()
        .enumerate()
    {
        all_pairs(
            &client,
            &mut raw,
            &format!("digits{k}"),
            &[edge - 1, edge, edge + 1],
        )
        .await;
    }
    // A short token after a long one that sorts before it as a string ("2" > "10").
    pair(&client, &mut raw, "fe:digits:2-10", 10, 2).await;
    pair(&client, &mut raw, "fe:digits:10-2", 2, 10).await;
}

/// Equal tokens are accepted, again and again, each write replacing the value (the same holder
/// writes as often as it likes with its token); a lower one after them is refused.
/// Bug: `>` for `>=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_tokens_are_accepted_every_time() {
    let (_server, client, mut raw) = fixture().await;
    for (k, token) in [1, 9, 10, P53, i64::MAX].into_iter().enumerate() {
        let value = client.get_fenced_value(format!("fe:equal:{k}"));
        for round in 0..3 {
            let v = format!("round {round}");
            assert!(
                value.set(token, &v).await.unwrap(),
                "{token}: write {round} with the same token refused"
            );
            assert_eq!(
                held(&mut raw, &value).await,
                [Some(v), Some(token.to_string())],
                "{token}"
            );
        }
        if token > 1 {
            assert!(!value.set(token - 1, "stale").await.unwrap(), "{token}");
            assert_eq!(
                get_str(&mut raw, value.key()).await.as_deref(),
                Some("round 2")
            );
        }
    }
}

/// Around 2^53, where a double cannot tell n from n + 1: every ordered pair of 2^53 - 2 ...
/// 2^53 + 2. Bug: comparing `tonumber` values (2^53 + 1 reads as 2^53, so a stale 2^53 is
/// accepted after 2^53 + 1), or storing the token as a Lua number (stored rounded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_holds_around_2_pow_53() {
    let (_server, client, mut raw) = fixture().await;
    let tokens: Vec<i64> = (-2..=2).map(|d| P53 + d).collect();
    all_pairs(&client, &mut raw, "p53", &tokens).await;
}

/// Around i64::MAX, the greatest token the API takes (and the greatest `INCR` can mint):
/// every ordered pair of its neighbours; the type allows nothing above it, and nothing below 1
/// is sent at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_holds_up_to_i64_max() {
    let (_server, client, mut raw) = fixture().await;
    let tokens: Vec<i64> = (0..4).map(|d| i64::MAX - d).collect();
    all_pairs(&client, &mut raw, "max", &tokens).await;
    // Far apart too (a comparison that wraps or saturates would get these wrong).
    pair(&client, &mut raw, "fe:max:1-max", 1, i64::MAX).await;
    pair(&client, &mut raw, "fe:max:max-1", i64::MAX, 1).await;
    // Below 1: refused before anything is sent, the value untouched.
    let value = client.get_fenced_value("fe:max:low");
    for bad in [0, -1, i64::MIN] {
        assert_invalid(value.set(bad, "x").await, "set(token < 1)");
    }
    assert_eq!(held(&mut raw, &value).await, [None, None]);
}

/// With no previous fenced write, any token is accepted (the lowest and the greatest), and
/// also when the value's key already holds something written without a fence; the fence then
/// holds that token.
/// Bug: a missing fence read as a refusal (or as a huge token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_fenced_write_is_accepted_whatever_its_token() {
    let (_server, client, mut raw) = fixture().await;
    for (k, token) in [1, 2, 10, P53 + 1, i64::MAX].into_iter().enumerate() {
        let value = client.get_fenced_value(format!("fe:first:{k}"));
        assert_eq!(value.last_token().await.unwrap(), None);
        assert!(
            value.set(token, "v").await.unwrap(),
            "{token} refused on a fresh value"
        );
        assert_eq!(
            held(&mut raw, &value).await,
            [Some("v".to_owned()), Some(token.to_string())]
        );
        // Written outside the fence before: the first fenced write still goes through.
        let unfenced = client.get_fenced_value(format!("fe:first:plain:{k}"));
        let _: () = raw.set(unfenced.key(), "plain").await.unwrap();
        assert!(unfenced.set(token, "fenced").await.unwrap(), "{token}");
        assert_eq!(
            held(&mut raw, &unfenced).await,
            [Some("fenced".to_owned()), Some(token.to_string())]
        );
    }
}

/// Tokens where a bug would show: 1..3, each power of ten's neighbours, 2^53's and i64::MAX's.
fn edge_tokens() -> Vec<i64> {
    let mut edges = vec![1, 2, 3];
    let mut p: i64 = 10;
    for _ in 1..=18 {
        edges.extend([p - 1, p, p + 1]);
        p = p.saturating_mul(10);
    }
    edges.extend((-3..=3).map(|d| P53 + d));
    edges.extend((0..4).map(|d| i64::MAX - d));
    edges
}

/// A token: an edge, an edge's near neighbour, or anything in 1..=i64::MAX.
fn token() -> impl Strategy<Value = i64> {
    let edges = edge_tokens();
    prop_oneof![
        proptest::sample::select(edges.clone()),
        (proptest::sample::select(edges), -3i64..=3).prop_map(|(e, d)| e.saturating_add(d).max(1)),
        1..=i64::MAX,
    ]
}

/// A run of writes: independent tokens, or tokens clustered around one edge (so that close
/// pairs, equal ones included, come often).
fn writes() -> impl Strategy<Value = Vec<i64>> {
    prop_oneof![
        proptest::collection::vec(token(), 1..7),
        (
            proptest::sample::select(edge_tokens()),
            proptest::collection::vec(-2i64..=2, 1..7)
        )
            .prop_map(|(base, ds)| ds
                .into_iter()
                .map(|d| base.saturating_add(d).max(1))
                .collect()),
    ]
}

/// Runs `tokens` as writes to a fresh value and checks each against the model: accepted iff no
/// fenced write came before or the token is at least the greatest accepted so far; then the
/// value is the last accepted write's and the fence that token, exactly.
async fn check_against_model(
    client: &Client,
    raw: &mut redis::aio::MultiplexedConnection,
    key: String,
    tokens: &[i64],
) -> Result<(), TestCaseError> {
    let value = client.get_fenced_value(key);
    let mut model: Option<(i64, String)> = None;
    for (i, &t) in tokens.iter().enumerate() {
        let v = format!("w{i}:{t}");
        let expected = model.as_ref().is_none_or(|(last, _)| t >= *last);
        let got = value.set(t, &v).await.unwrap();
        prop_assert_eq!(
            got,
            expected,
            "write {} with token {} of {:?}",
            i,
            t,
            tokens
        );
        if expected {
            model = Some((t, v));
        }
        let (last, current) = model.clone().unzip();
        prop_assert_eq!(
            held(raw, &value).await,
            [current, last.map(|t| t.to_string())],
            "after write {} of {:?}",
            i,
            tokens
        );
        prop_assert_eq!(value.last_token().await.unwrap(), last);
    }
    Ok(())
}

/// The rule against a model, on generated runs of writes (edges, their neighbours, anything),
/// one fresh value per case, all on one real server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_writes_follow_the_model() {
    let (_server, client, raw) = fixture().await;
    let cases = AtomicU64::new(0);
    let rt = tokio::runtime::Handle::current();
    let config = PropConfig {
        cases: 192,
        failure_persistence: None,
        ..PropConfig::default()
    };
    let result = tokio::task::block_in_place(|| {
        TestRunner::new(config).run(&writes(), |tokens| {
            let n = cases.fetch_add(1, Ordering::Relaxed);
            let mut raw = raw.clone();
            rt.block_on(check_against_model(
                &client,
                &mut raw,
                format!("fe:prop:{n}"),
                &tokens,
            ))
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(cases.load(Ordering::Relaxed) >= 192);
}

/// What a token becomes when a Lua script returns it as a number (a double, converted back to
/// an integer by the server): exact up to 2^53, rounded above, i64::MIN from 2^63 - 512 up.
fn as_lua_number(t: i64) -> i64 {
    let d = t as f64;
    if d >= 9_223_372_036_854_775_808.0 {
        i64::MIN
    } else {
        d as i64
    }
}

/// Our fenced lock hands out the counter's exact value as its token, past 2^53 and up to
/// i64::MAX: strictly increasing, each once. Then the counter cannot go on (`INCR` overflows):
/// the acquire fails and takes nothing.
/// Bug (found by this test, fixed in `lua/fenced_lock.lua`): the script returned `INCR`'s reply
/// as a Lua number, so 2^53 + 1 came back as 2^53 (a token handed out twice: a stale holder's
/// writes accepted) and tokens near i64::MAX as i64::MIN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_fenced_lock_mints_exact_tokens_past_2_pow_53() {
    let (_server, client, mut raw) = fixture().await;
    for (k, start) in [P53 - 3, i64::MAX - 3].into_iter().enumerate() {
        let name = format!("fe:mint:{k}");
        let counter = format!("redisson_lock_token:{{{name}}}");
        let _: () = raw.set(&counter, start).await.unwrap();
        let lock = client.get_fenced_lock(&name);
        let value = client.get_fenced_value(format!("fe:mint:value:{k}"));
        let mut previous = None;
        for i in 1..=3 {
            let guard = lock.lock().await.unwrap();
            let t = guard.token();
            assert_eq!(t, start + i, "acquisition {i} from {start}");
            assert_eq!(get_str(&mut raw, &counter).await, Some(t.to_string()));
            assert_eq!(lock.current_token().await.unwrap(), Some(t));
            assert!(value.set(t, format!("{t}")).await.unwrap(), "{t}");
            if let Some(p) = previous {
                assert!(!value.set(p, "stale").await.unwrap(), "{p} after {t}");
            }
            previous = Some(t);
            guard.unlock().await.unwrap();
        }
        if start + 3 == i64::MAX {
            assert!(lock.try_lock().await.is_err(), "a token past i64::MAX");
            assert!(
                !exists(&mut raw, &name).await,
                "an acquire without a token held the lock"
            );
            assert_eq!(
                get_str(&mut raw, &counter).await,
                Some(i64::MAX.to_string())
            );
        }
    }
}

/// Tokens minted by Java Redisson's `RFencedLock` fence our `FencedValue`: they increase across
/// Java's and our acquisitions, a stale token is refused once a newer one wrote, and an equal one
/// is accepted. At the edges too: the counter `redisson_lock_token:{name}` is an `INCR` counter
/// (i64), so it goes on past 2^53 (an old counter) and up to i64::MAX. Redisson's
/// `getToken()` reads it exactly; its `lockAndGetToken()` returns it through a Lua number
/// (`return {-1, token}` in `RedissonFencedLock`), so above 2^53 that value is rounded (and
/// near i64::MAX it is i64::MIN): pinned here, as what a Java writer must know (use
/// `getToken()`). Ours are exact (`our_fenced_lock_mints_exact_tokens_past_2_pow_53`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_minted_by_java_fence_our_values() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        for (k, start) in [None, Some(P53 - 2), Some(i64::MAX - 3)]
            .into_iter()
            .enumerate()
        {
            let what = format!("{v} from {start:?}");
            let name = format!("fe:java:{v}:{k}");
            let counter = format!("redisson_lock_token:{{{name}}}");
            if let Some(s) = start {
                let _: () = raw.set(&counter, s).await.unwrap();
            }
            let ours = client.get_fenced_lock(&name).with_owner(LockOwner::new(1));
            let value = client.get_fenced_value(format!("fe:java:value:{v}:{k}"));
            let java_token = || async {
                let got = peer.ok("a", &format!("token fenced {name}")).await;
                got.parse::<i64>().unwrap()
            };

            // Java mints the first token and writes with it.
            let returned: i64 = peer.lock("a", "fenced", &name, None).await.parse().unwrap();
            let t1 = java_token().await;
            assert_eq!(t1, start.unwrap_or(0) + 1, "{what}: getToken");
            assert_eq!(returned, as_lua_number(t1), "{what}: lockAndGetToken");
            assert!(value.set(t1, "java 1").await.unwrap(), "{what}");
            peer.unlock("a", "fenced", &name).await.unwrap();

            // We take over with the next token and write; Java's stale token is refused.
            let guard = ours.lock().await.unwrap();
            let t2 = guard.token();
            assert_eq!(t2, t1 + 1, "{what}: our token after Java's");
            assert!(value.set(t2, "rust 2").await.unwrap(), "{what}");
            assert!(!value.set(t1, "java stale").await.unwrap(), "{what}");
            guard.unlock().await.unwrap();

            // Java again: its next token is above ours and wins; once it wrote, ours is stale.
            let returned: i64 = peer.lock("a", "fenced", &name, None).await.parse().unwrap();
            let t3 = java_token().await;
            assert_eq!(t3, t2 + 1, "{what}");
            assert_eq!(returned, as_lua_number(t3), "{what}: lockAndGetToken");
            assert!(value.set(t3, "java 3").await.unwrap(), "{what}");
            assert!(!value.set(t2, "rust stale").await.unwrap(), "{what}");
            assert!(
                value.set(t3, "java 3 again").await.unwrap(),
                "{what}: equal token"
            );
            peer.unlock("a", "fenced", &name).await.unwrap();
            assert_eq!(
                held(&mut raw, &value).await,
                [Some("java 3 again".to_owned()), Some(t3.to_string())],
                "{what}"
            );
            assert_eq!(value.last_token().await.unwrap(), Some(t3), "{what}");
            assert_eq!(
                get_str(&mut raw, &counter).await,
                Some(t3.to_string()),
                "{what}"
            );
        }
    }
}
