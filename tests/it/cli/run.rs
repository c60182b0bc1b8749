//! `run NAME -- CMD`: flock(1) for a fleet. The command runs while the lock is held, its exit
//! status comes through, the lock is released after; "not taken", `--timeout`, a signal to the
//! CLI and a lost hold each have their own exit code (docs/cli.md).

use std::process::Stdio;

use crate::cli::*;
use crate::support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The hold of `cli:run` lost behind the CLI's back: its key deleted.
async fn lose_the_hold(server: &TestServer) {
    let mut raw = server.conn().await;
    let _: () = redis::cmd("DEL")
        .arg("cli:run")
        .query_async(&mut raw)
        .await
        .unwrap();
}

fn run_args(server: &TestServer, flags: &[&str], command: &[&str]) -> Vec<String> {
    let mut a = args(server, &["run", "cli:run"]);
    a.extend(flags.iter().map(|s| s.to_string()));
    a.push("--".to_owned());
    a.extend(command.iter().map(|s| s.to_string()));
    a
}

/// The command sees the lock held (it asks the server itself), its exit status is the CLI's,
/// and the lock is gone once the CLI has exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_holds_the_lock_while_the_command_runs_and_passes_its_status() {
    let server = TestServer::start();
    let probe = format!(
        "{} -p {} hlen cli:run; exit 7",
        redis_cli_bin(),
        server.port
    );
    let out = cli(&run_args(&server, &["--wait", "5s"], &["sh", "-c", &probe])).await;
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "1", "the command saw one holder");
    assert!(!exists_on(&server, "cli:run").await, "released after");

    // A fixed lease instead of the watchdog: the key carries it while the command runs.
    let probe = format!("{} -p {} pttl cli:run", redis_cli_bin(), server.port);
    let out = cli(&run_args(
        &server,
        &["--lease", "10m"],
        &["sh", "-c", &probe],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pttl: i64 = out.stdout.trim().parse().unwrap();
    assert!(pttl > 500_000 && pttl <= 600_000, "pttl {pttl}");

    // A command that cannot be found: 127, as a shell says, and nothing left held.
    let out = cli(&run_args(&server, &[], &["/nonexistent/cli-run-command"])).await;
    assert_eq!(out.code, 127, "{}", out.stderr);
    assert!(out.stderr.contains("cannot run"), "{}", out.stderr);
    assert!(!exists_on(&server, "cli:run").await);
}

/// Held by someone else: exit 75 (or `-E CODE`), a clear message, and the command never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_says_not_taken_with_its_own_exit_code() {
    let (server, client) = with_client().await;
    let guard = client.get_lock("cli:busy-run").lock().await.unwrap();
    let marker = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let touch = format!("rm -f {}", marker.display());
    let a = {
        let mut a = args(&server, &["run", "cli:busy-run", "--nonblock", "--"]);
        a.extend(["sh", "-c", &touch].map(String::from));
        a
    };
    let out = cli(&a).await;
    assert_eq!(out.code, 75, "{}", out.stderr);
    assert!(out.stderr.contains("not taken"), "{}", out.stderr);
    assert!(marker.exists(), "the command must not run");
    let mut a = args(
        &server,
        &["run", "cli:busy-run", "--wait", "200ms", "-E", "9", "--"],
    );
    a.extend(["sh", "-c", &touch].map(String::from));
    let out = cli(&a).await;
    assert_eq!(out.code, 9, "{}", out.stderr);
    assert!(out.stderr.contains("waited 200ms"), "{}", out.stderr);
    assert!(marker.exists());
    guard.unlock().await.unwrap();

    // Usage: a duration that is not one is refused before anything runs (exit 2).
    let out = cli(&args(
        &server,
        &["run", "x", "--wait", "soon", "--", "true"],
    ))
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("not a duration"), "{}", out.stderr);
}

/// `--timeout`: the command is stopped (SIGTERM) when it runs past it, the CLI exits 124 and
/// the lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_timeout_stops_the_command_and_exits_124() {
    let server = TestServer::start();
    let out = cli(&run_args(&server, &["--timeout", "1s"], &["sleep", "600"])).await;
    assert_eq!(out.code, 124, "{}", out.stderr);
    assert!(out.stderr.contains("--timeout"), "{}", out.stderr);
    assert!(!exists_on(&server, "cli:run").await);
}

/// A running `run` and its command's stdout lines.
async fn start_run(
    a: &[String],
) -> (
    tokio::process::Child,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) {
    let mut child = command(a).stdin(Stdio::null()).spawn().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// SIGTERM to the CLI reaches the command (whose trap sets the status), and the lock is
/// released before the CLI exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_forwards_sigterm_to_the_command_and_releases() {
    let server = TestServer::start();
    let script = "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done";
    let (mut child, mut lines) = start_run(&run_args(&server, &[], &["sh", "-c", script])).await;
    let ready = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ready.as_deref(), Some("ready"));
    assert!(exists_on(&server, "cli:run").await);
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(42));
    assert!(!exists_on(&server, "cli:run").await);
}

/// The hold lost while the command runs (the key deleted behind its back): said on stderr;
/// with `--kill-on-lost` the command is stopped and the CLI exits 76.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_reports_a_lost_hold_and_kill_on_lost_stops_the_command() {
    let server = TestServer::start();
    let a = run_args(
        &server,
        &["--watchdog-timeout", "3s", "--kill-on-lost"],
        &["sh", "-c", "echo ready; exec sleep 600"],
    );
    let (child, mut lines) = start_run(&a).await;
    let ready = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ready.as_deref(), Some("ready"));
    lose_the_hold(&server).await;
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("the command was not stopped")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(76), "{stderr}");
    assert!(stderr.contains("lost the hold of `cli:run`"), "{stderr}");
}

/// The flag's absence: without `--kill-on-lost`, a hold lost while the command runs is said on
/// stderr (once, with no "stopping"), the command goes on to its own end, and its exit status
/// is the CLI's (docs/cli.md, `run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_kill_on_lost_a_lost_hold_is_reported_and_the_command_goes_on() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    // The command runs until the test creates `go`, then says so and exits 9.
    let script = format!(
        "echo ready; while [ ! -e {} ]; do sleep 0.05; done; echo finished; exit 9",
        go.display()
    );
    let a = run_args(
        &server,
        &["--watchdog-timeout", "3s"],
        &["sh", "-c", &script],
    );
    let mut child = command(&a).stdin(Stdio::null()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = tokio::time::timeout(WAIT, stdout.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ready.as_deref(), Some("ready"));
    lose_the_hold(&server).await;
    // Event-driven: the CLI's report of the loss, read as it is written.
    let mut said = Vec::new();
    let lost = tokio::time::timeout(WAIT, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            let found = line.contains("lost the hold of `cli:run`");
            said.push(line);
            if found {
                return;
            }
        }
    })
    .await;
    assert!(lost.is_ok(), "the loss was not reported: {said:?}");
    let report = said.last().unwrap().clone();
    assert!(!report.contains("stopping"), "{report}");
    // The command was not stopped: it still runs, and ends when told to.
    assert!(
        child.try_wait().unwrap().is_none(),
        "the CLI or the command ended"
    );
    std::fs::write(&go, b"").unwrap();
    let finished = tokio::time::timeout(WAIT, stdout.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        finished.as_deref(),
        Some("finished"),
        "the command was cut short"
    );
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the CLI did not exit")
        .unwrap();
    let mut rest = String::new();
    while let Ok(Some(line)) = stderr.next_line().await {
        rest.push_str(&line);
        rest.push('\n');
    }
    assert_eq!(status.code(), Some(9), "{rest}");
    // Reported once: the release at the end does not say it again.
    assert!(!rest.contains("lost"), "{rest}");
    assert!(!exists_on(&server, "cli:run").await);
}

/// The flags' absence: without `--nonblock` and `--wait`, `run` waits for as long as the lock
/// is held (docs/cli.md: "default: wait for ever"), then runs the command once it is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nonblock_or_wait_run_waits_until_the_lock_is_free() {
    let (server, client) = with_client().await;
    let guard = client.get_lock("cli:run").lock().await.unwrap();
    let a = run_args(&server, &[], &["sh", "-c", "echo ran; exit 5"]);
    let mut child = command(&a).stdin(Stdio::null()).spawn().unwrap();
    // Event-driven: the CLI is parked on the lock's channel.
    let channel = "redisson_lock__channel:{cli:run}";
    assert!(
        eventually(WAIT, || async { numsub_on(&server, channel).await >= 1 }).await,
        "the CLI did not wait on the lock"
    );
    assert!(child.try_wait().unwrap().is_none(), "gave up while held");
    guard.unlock().await.unwrap();
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("the CLI did not take the freed lock")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ran");
    assert!(!exists_on(&server, "cli:run").await);
}
