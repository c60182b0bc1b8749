//! `run NAME -- CMD`: flock(1) for a fleet. The command runs while the lock is held, its exit
//! status comes through, the lock is released after; "not taken", `--timeout`, a signal to the
//! CLI and a lost hold each have their own exit code (docs/cli.md).

use std::process::Stdio;

use crate::cli::*;
use crate::support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

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
    let mut raw = server.conn().await;
    let _: () = redis::cmd("DEL")
        .arg("cli:run")
        .query_async(&mut raw)
        .await
        .unwrap();
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("the command was not stopped")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(76), "{stderr}");
    assert!(stderr.contains("lost the hold of `cli:run`"), "{stderr}");
}
