//! `force-unlock`: frees a lock, wakes waiters, asks first (showing each holder), removes only
//! the holders it showed, writes an audit line, uses a read-write lock's mode.

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

    let holder = field(&client, guard.owner());
    for answer in [Some("n\n"), Some("\n"), None] {
        let out = cli_in(&args(&server, &["force-unlock", "cli:keep"]), answer).await;
        // No, or no answer at all: a distinct status, nothing changed, nothing audited.
        assert_eq!(out.code, 4, "{}", out.stderr);
        assert!(out.stderr.contains("[y/N]"), "{}", out.stderr);
        assert!(
            out.stderr.contains(&holder),
            "the prompt shows the holder: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("audit:"), "{}", out.stderr);
        assert!(out.stdout.contains("aborted"), "{}", out.stdout);
        assert_eq!(fields(&mut raw, "cli:keep").await, before);
    }
    let out = cli_in(&args(&server, &["force-unlock", "cli:keep"]), Some("y\n")).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("unlocked"), "{}", out.stdout);
    assert!(!exists(&mut raw, "cli:keep").await);
    drop(guard);
}

/// The holder shown at the prompt is the only one removed: released and taken by another
/// client while the operator reads the prompt, the lock is left to its new holder (exit 5,
/// audited); `--owner` names the holder to remove and refuses any other; every removal writes
/// one audit line on stderr and in `--audit-log`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_removes_only_the_holder_it_showed_and_audits() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (server, [first, second]) = two_clients().await;
    let guard = first.get_lock("cli:swap").lock().await.unwrap();
    let mut cmd = command(&args(&server, &["force-unlock", "cli:swap"]));
    let mut child = cmd.stdin(std::process::Stdio::piped()).spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let prompt = async {
        let mut buf = Vec::new();
        loop {
            let n = stderr.read_until(b']', &mut buf).await.unwrap();
            assert!(n > 0, "no prompt: {}", String::from_utf8_lossy(&buf));
            if buf.ends_with(b"[y/N]") {
                return String::from_utf8_lossy(&buf).into_owned();
            }
        }
    };
    seen.push_str(&tokio::time::timeout(WAIT, prompt).await.expect("prompt"));
    let shown = field(&first, guard.owner());
    assert!(seen.contains(&shown), "{seen}");
    // While the operator reads: released, and taken by another client.
    guard.unlock().await.unwrap();
    let taken = second.get_lock("cli:swap").lock().await.unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"y\n").await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let mut rest = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut rest)
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{seen}{rest}");
    assert!(
        rest.contains("audit:") && rest.contains("refused"),
        "{rest}"
    );
    assert!(
        taken.lock().is_held_by(taken.owner()).await.unwrap(),
        "the new holder keeps it"
    );

    // --owner: another holder is refused before anything is asked; the right one is removed.
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().to_str().unwrap().to_owned();
    let out = cli(&args(
        &server,
        &["force-unlock", "cli:swap", "--yes", "--owner", &shown],
    ))
    .await;
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(taken.lock().is_held_by(taken.owner()).await.unwrap());
    let holder = field(&second, taken.owner());
    let a = [
        "force-unlock",
        "cli:swap",
        "--yes",
        "--owner",
        &holder,
        "--audit-log",
        &log_path,
    ];
    let out = cli(&args(&server, &a)).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let audited = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(audited.lines().count(), 1, "{audited}");
    for part in [
        "command=force-unlock",
        "target=cli:swap",
        "outcome=\"removed\"",
        &holder,
        "operator=",
    ] {
        assert!(audited.contains(part), "{part} in {audited}");
    }
    assert!(out.stderr.contains(audited.trim()), "{}", out.stderr);
    assert!(
        eventually(WAIT, || async {
            taken.is_lost() || !taken.lock().is_locked().await.unwrap()
        })
        .await
    );
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
