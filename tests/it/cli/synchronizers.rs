//! The synchronizers' write commands, checked through the crate's own API (what a Java client
//! would read): semaphore permits, a permit-expirable semaphore's permit released by id, a
//! latch counted down (its waiter woken) and deleted, a rate limiter's window reset.

use std::time::Duration;

use crate::cli::*;
use crate::support::*;
use redisson_lock::RateType;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_and_permit_semaphore_permits_are_set_added_and_released() {
    let (server, client) = with_client().await;
    let sem = client.get_semaphore("cli:sem-w");
    let v = json(args(
        &server,
        &["semaphore", "set", "cli:sem-w", "5", "--yes"],
    ))
    .await;
    assert_eq!(
        (v["count"].clone(), v["changed"].clone()),
        (5.into(), true.into())
    );
    assert_eq!(sem.available_permits().await.unwrap(), 5);
    json(args(
        &server,
        &["semaphore", "set", "cli:sem-w", "2", "--yes"],
    ))
    .await;
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    json(args(
        &server,
        &["semaphore", "add", "cli:sem-w", "3", "--yes"],
    ))
    .await;
    let v = json(args(
        &server,
        &["semaphore", "add", "cli:sem-w", "-1", "--yes"],
    ))
    .await;
    assert_eq!(v["count"], 4);
    assert_eq!(sem.available_permits().await.unwrap(), 4);

    let pes = client.get_permit_expirable_semaphore("cli:pes-w");
    assert!(pes.try_set_permits(2).await.unwrap());
    let id = pes
        .with_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    assert_eq!(pes.available_permits().await.unwrap(), 1);
    let release = args(
        &server,
        &[
            "permit-semaphore",
            "release",
            "cli:pes-w",
            id.as_str(),
            "--yes",
        ],
    );
    let v = json(release.clone()).await;
    assert_eq!(
        (v["changed"].clone(), v["count"].clone()),
        (true.into(), 2.into())
    );
    assert_eq!(pes.available_permits().await.unwrap(), 2);
    let v = json(release).await;
    assert_eq!(v["changed"], false, "released already");
    json(args(
        &server,
        &["permit-semaphore", "set", "cli:pes-w", "7", "--yes"],
    ))
    .await;
    assert_eq!(pes.available_permits().await.unwrap(), 7);
    json(args(
        &server,
        &["permit-semaphore", "add", "cli:pes-w", "1", "--yes"],
    ))
    .await;
    assert_eq!(pes.available_permits().await.unwrap(), 8);

    let bad = cli(&args(
        &server,
        &["permit-semaphore", "release", "cli:pes-w", "nope"],
    ))
    .await;
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(bad.stderr.contains("32 hex"), "{}", bad.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_count_down_wakes_its_waiter_and_delete_removes_it() {
    let (server, client) = with_client().await;
    let latch = client.get_count_down_latch("cli:latch-w");
    assert!(latch.try_set_count(2).await.unwrap());
    let l = latch.clone();
    let waiter = tokio::spawn(async move { l.wait().await });
    wait_subscribers(
        &server,
        "redisson_countdownlatch__channel__{cli:latch-w}",
        1,
    )
    .await;
    let v = json(args(
        &server,
        &["latch", "count-down", "cli:latch-w", "--yes"],
    ))
    .await;
    assert_eq!(v["count"], 1);
    json(args(
        &server,
        &["latch", "count-down", "cli:latch-w", "--yes"],
    ))
    .await;
    finished(waiter, WAIT, "the latch waiter was not woken").await;

    assert!(latch.try_set_count(3).await.unwrap());
    let v = json(args(&server, &["latch", "delete", "cli:latch-w", "--yes"])).await;
    assert_eq!(v["changed"], true);
    assert_eq!(latch.get_count().await.unwrap(), 0);
    let v = json(args(&server, &["latch", "delete", "cli:latch-w", "--yes"])).await;
    assert_eq!(v["changed"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limiter_reset_starts_a_fresh_window_and_delete_removes_it() {
    let (server, client) = with_client().await;
    let limiter = client.get_rate_limiter("cli:rate-w");
    limiter
        .set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            2,
            Duration::from_secs(3600),
        ))
        .await
        .unwrap();
    limiter.acquire_many(2).await.unwrap();
    assert_eq!(limiter.available_permits().await.unwrap(), 0);
    let v = json(args(
        &server,
        &["rate-limiter", "reset", "cli:rate-w", "--yes"],
    ))
    .await;
    assert_eq!(v["count"], 2);
    assert_eq!(limiter.available_permits().await.unwrap(), 2);

    let missing = cli(&args(&server, &["rate-limiter", "reset", "cli:rate-none"])).await;
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("not a configured rate limiter"),
        "{}",
        missing.stderr
    );

    // `delete`: every key Redisson names goes (the configuration and the OVERALL window), so
    // a client's acquire now fails as on a limiter never configured; a second delete changes
    // nothing.
    let v = json(args(
        &server,
        &["rate-limiter", "delete", "cli:rate-w", "--yes"],
    ))
    .await;
    assert_eq!(v["action"], "delete");
    assert_eq!(v["changed"], true);
    assert!(limiter.config().await.unwrap().is_none());
    let mut raw = server.conn().await;
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("*cli:rate-w*")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(left.is_empty(), "keys left after delete: {left:?}");
    assert!(limiter.try_acquire().await.is_err());
    let v = json(args(
        &server,
        &["rate-limiter", "delete", "cli:rate-w", "--yes"],
    ))
    .await;
    assert_eq!(v["changed"], false);
}

/// Every key with its `DUMP` (the value, not its TTL), sorted: what "nothing changed" compares.
async fn snapshot(raw: &mut redis::aio::MultiplexedConnection) -> Vec<(String, Vec<u8>)> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(raw).await.unwrap();
    keys.sort();
    let mut all = Vec::new();
    for k in keys {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query_async(raw).await.unwrap();
        all.push((k, dump));
    }
    all
}

/// One of each synchronizer, with a permit taken: `(semaphore, permit semaphore, its permit,
/// latch, rate limiter)` hold 3 permits, 2 available + 1 taken, the permit id, count 2, 2 of
/// 5 permits taken.
async fn one_of_each(client: &redisson_lock::Client) -> String {
    assert!(client
        .get_semaphore("cli:ask-sem")
        .try_set_permits(3)
        .await
        .unwrap());
    let pes = client.get_permit_expirable_semaphore("cli:ask-pes");
    assert!(pes.try_set_permits(3).await.unwrap());
    let id = pes
        .with_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    assert!(client
        .get_count_down_latch("cli:ask-latch")
        .try_set_count(2)
        .await
        .unwrap());
    let limiter = client.get_rate_limiter("cli:ask-rate");
    limiter
        .set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            5,
            Duration::from_secs(3600),
        ))
        .await
        .unwrap();
    limiter.acquire_many(2).await.unwrap();
    id.as_str().to_owned()
}

/// Each write command, its arguments, and what its prompt shows now (the value before).
fn writes(id: &str) -> Vec<(Vec<&str>, &'static str)> {
    vec![
        (
            vec!["semaphore", "set", "cli:ask-sem", "5"],
            "3 permit(s) available",
        ),
        (
            vec!["semaphore", "add", "cli:ask-sem", "1"],
            "3 permit(s) available",
        ),
        (
            vec!["permit-semaphore", "set", "cli:ask-pes", "9"],
            "2 permit(s) available, 1 taken",
        ),
        (
            vec!["permit-semaphore", "add", "cli:ask-pes", "1"],
            "2 permit(s) available, 1 taken",
        ),
        (
            vec!["permit-semaphore", "release", "cli:ask-pes", id],
            "2 permit(s) available, 1 taken",
        ),
        (vec!["latch", "count-down", "cli:ask-latch"], "count 2"),
        (vec!["latch", "delete", "cli:ask-latch"], "count 2"),
        (
            vec!["rate-limiter", "reset", "cli:ask-rate"],
            "3 permit(s) left",
        ),
        (
            vec!["rate-limiter", "delete", "cli:ask-rate"],
            "3 permit(s) left",
        ),
    ]
}

/// Without `--yes` every write shows the server and the value now and asks; no, an empty
/// answer or no input at all exits 4 and changes nothing (every key's value the same), with no
/// audit line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_synchronizer_write_asks_and_no_or_eof_changes_nothing() {
    let (server, client) = with_client().await;
    let id = one_of_each(&client).await;
    let mut raw = server.conn().await;
    let before = snapshot(&mut raw).await;
    let port = format!("127.0.0.1:{}", server.port);
    for (write, now) in writes(&id) {
        for answer in [Some("n\n"), Some("\n"), None] {
            let out = cli_in(&args(&server, &write), answer).await;
            let seen = format!("{write:?} {answer:?}: {}{}", out.stdout, out.stderr);
            assert_eq!(out.code, 4, "{seen}");
            assert!(out.stderr.contains("[y/N]"), "{seen}");
            assert!(out.stderr.contains(now), "the value now: {seen}");
            assert!(out.stderr.contains(&port), "the server: {seen}");
            assert!(!out.stderr.contains("audit:"), "{seen}");
            assert!(out.stdout.contains("aborted: nothing changed"), "{seen}");
            assert_eq!(snapshot(&mut raw).await, before, "{seen}");
        }
    }
    let v = json_in(
        args(&server, &["semaphore", "set", "cli:ask-sem", "5"]),
        None,
        4,
    )
    .await;
    assert_eq!(
        (
            v["confirmed"].clone(),
            v["changed"].clone(),
            v["count"].clone()
        ),
        (false.into(), false.into(), 3.into())
    );
}

/// Answered yes, each write changes the value and appends one audit line to `--audit-log`
/// (and stderr) naming the command, the key, the server, and the value before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_synchronizer_write_answered_yes_changes_and_audits_old_and_new_values() {
    let (server, client) = with_client().await;
    let id = one_of_each(&client).await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().to_str().unwrap().to_owned();
    let expected = [
        (
            "semaphore set",
            "from=\"3 permit(s) available\" to=\"5 permit(s) available\"",
        ),
        (
            "semaphore add",
            "from=\"5 permit(s) available\" to=\"6 permit(s) available\"",
        ),
        (
            "permit-semaphore set",
            "from=\"2 permit(s) available, 1 taken\" to=\"8 permit(s) available\"",
        ),
        (
            "permit-semaphore add",
            "from=\"8 permit(s) available, 1 taken\" to=\"9 permit(s) available\"",
        ),
        (
            "permit-semaphore release",
            "from=\"9 permit(s) available, 1 taken\" to=\"10 permit(s) available\"",
        ),
        ("latch count-down", "from=\"count 2\" to=\"count 1\""),
        ("latch delete", "from=\"count 1\" to=none"),
        (
            "rate-limiter reset",
            "permit(s) left\" to=\"5 permit(s) available\"",
        ),
        ("rate-limiter delete", "5 permit(s) left\" to=none"),
    ];
    // Each step starts from the value the previous one left.
    for ((mut write, _), (command, values)) in writes(&id).into_iter().zip(expected) {
        write.extend(["--audit-log", &log_path]);
        let out = cli_in(&args(&server, &write), Some("y\n")).await;
        assert_eq!(out.code, 0, "{write:?}: {}", out.stderr);
        let audited = std::fs::read_to_string(&log_path).unwrap();
        let line = audited.lines().last().unwrap();
        for part in [
            &format!("command=\"{command}\""),
            &format!("target={}", write[2]),
            &format!("node=127.0.0.1:{}", server.port),
            values,
            "operator=",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        assert!(out.stderr.contains(line), "{}", out.stderr);
    }
    let audited = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(audited.lines().count(), 9, "{audited}");
    assert_eq!(
        client
            .get_semaphore("cli:ask-sem")
            .available_permits()
            .await
            .unwrap(),
        6
    );
    let pes = client.get_permit_expirable_semaphore("cli:ask-pes");
    assert_eq!(pes.available_permits().await.unwrap(), 10);
    let latch = client.get_count_down_latch("cli:ask-latch");
    assert_eq!(latch.get_count().await.unwrap(), 0);
    let limiter = client.get_rate_limiter("cli:ask-rate");
    assert!(limiter.config().await.unwrap().is_none());
}

/// A write command reads the key first: a lock or another synchronizer under that name is
/// left alone (exit 1), even with `--yes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_command_leaves_a_key_of_another_kind_alone() {
    let (server, client) = with_client().await;
    let guard = client.get_lock("cli:not-a-latch").lock().await.unwrap();
    let pes = client.get_permit_expirable_semaphore("cli:a-pes");
    assert!(pes.try_set_permits(2).await.unwrap());
    let _id = pes.acquire().await.unwrap();
    for write in [
        &["latch", "delete", "cli:not-a-latch", "--yes"][..],
        &["rate-limiter", "delete", "cli:not-a-latch", "--yes"][..],
        &["semaphore", "add", "cli:not-a-latch", "1", "--yes"][..],
        &["semaphore", "set", "cli:a-pes", "5", "--yes"][..],
    ] {
        let out = cli(&args(&server, write)).await;
        assert_eq!(out.code, 1, "{write:?}: {}", out.stderr);
        assert!(out.stderr.contains("leaves it alone"), "{}", out.stderr);
    }
    assert!(guard.lock().is_held_by(guard.owner()).await.unwrap());
    assert_eq!(pes.available_permits().await.unwrap(), 1);
}
