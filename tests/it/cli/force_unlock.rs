//! `force-unlock`: frees a lock, wakes waiters, asks first, uses a read-write lock's mode.

use crate::cli::*;
use crate::support::*;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_the_lock_and_wakes_another_clients_waiter() {
    let server = TestServer::start();
    let (_holder, guard, waiter) = held_with_waiter(&server, "cli:stuck").await;

    let out = cli(&args(&server, &["force-unlock", "cli:stuck", "--yes"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("unlocked"), "{}", out.stdout);
    // The watchdog lease is 30 s: only the release message can wake the waiter this soon.
    finished(waiter, WAIT, "the waiter was not woken").await;
    assert!(
        eventually(WAIT * 2, || async {
            guard.is_lost() || !guard.lock().is_held_by(guard.owner()).await.unwrap()
        })
        .await
    );

    let again = json(args(&server, &["force-unlock", "cli:free", "--yes"])).await;
    assert_eq!(again["unlocked"], false);
    assert_eq!(again["kind"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_without_yes_asks_and_no_changes_nothing() {
    let (server, client) = with_client().await;
    let guard = client.get_lock("cli:keep").lock().await.unwrap();
    let mut raw = server.conn().await;
    let before = fields(&mut raw, "cli:keep").await;

    for answer in [Some("n\n"), Some("\n"), None] {
        let out = cli_in(&args(&server, &["force-unlock", "cli:keep"]), answer).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stderr.contains("[y/N]"), "{}", out.stderr);
        assert!(out.stdout.contains("aborted"), "{}", out.stdout);
        assert_eq!(fields(&mut raw, "cli:keep").await, before);
    }
    let out = cli_in(&args(&server, &["force-unlock", "cli:keep"]), Some("y\n")).await;
    assert!(out.stdout.contains("unlocked"), "{}", out.stdout);
    assert!(!exists(&mut raw, "cli:keep").await);
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_of_a_read_write_lock_uses_its_mode() {
    let (server, client) = with_client().await;
    let rw = client.get_read_write_lock("cli:rwf");
    let w = rw.write_lock().lock().await.unwrap();
    let mut listener = Listener::start(&server, "redisson_rwlock:{cli:rwf}").await;
    let v = json(args(&server, &["force-unlock", "cli:rwf", "--yes"])).await;
    assert_eq!(v["kind"], "read_write");
    assert_eq!(v["unlocked"], true);
    // Redisson's write-side forceUnlock publishes the read-write unlock message `1`.
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("1"));
    drop(w);
}
