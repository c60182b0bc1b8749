//! A closed stdout (`redisson-lock list | head -1`, once `head` has exited): every command ends
//! quietly with 141, what a shell reports for a tool killed by SIGPIPE (docs/cli.md, "Exit
//! codes"), instead of a panic and its backtrace from `println!`.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

use crate::cli::*;
use crate::support::*;

/// The documented status of a command whose stdout was closed.
const STDOUT_CLOSED: i32 = 141;

/// A pipe whose read end is already closed: its write end, for a child's stdout. Every write
/// to it fails with `EPIPE`, from the first byte (no race with the child's start).
fn pipe_without_reader() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: `pipe2` fills `fds` with two new descriptors, each owned once below.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both are open and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Runs the CLI with stdout a pipe nobody reads (closed, as `head` leaves it once it has
/// exited); `(exit code, stderr)`.
async fn with_stdout_closed(args: &[String]) -> (i32, String) {
    let child = command(args)
        .stdin(Stdio::null())
        .stdout(pipe_without_reader())
        .spawn()
        .expect("run redisson-lock");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("redisson-lock did not exit with its stdout closed")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_every_command_quietly_with_141() {
    let server = TestServer::start();
    let mut raw = server.conn().await;
    // Many locks: `list`'s output is far more than a pipe's buffer.
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.hset(
            format!("cli-pipe:{i}"),
            format!("0badc0de-0000-4000-8000-000000000000:{i}"),
            1,
        )
        .ignore();
    }
    let _: () = pipe.query_async(&mut raw).await.unwrap();

    let commands: [&[&str]; 5] = [
        &["list"],
        &["--json", "list", "cli-pipe:*"],
        &["inspect", "cli-pipe:7"],
        &["--json", "inspect", "cli-pipe:7"],
        // A watch would otherwise run for ten minutes: it ends at its first line.
        &["watch", "cli-pipe:7", "--for", "600"],
    ];
    for rest in commands {
        let (code, stderr) = with_stdout_closed(&args(&server, rest)).await;
        assert!(!stderr.contains("panicked"), "{rest:?}: {stderr}");
        assert!(!stderr.contains("error:"), "{rest:?}: {stderr}");
        assert_eq!(code, STDOUT_CLOSED, "{rest:?}: {stderr}");
    }
    // And a command that connects to nothing.
    let (code, stderr) = with_stdout_closed(&["completions".into(), "bash".into()]).await;
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(code, STDOUT_CLOSED, "{stderr}");
}

/// Runs the CLI with stderr a pipe nobody reads; its exit code (a panic would be 101).
async fn exit_with_stderr_closed(args: &[String]) -> i32 {
    let child = command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(pipe_without_reader())
        .spawn()
        .expect("run redisson-lock");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("redisson-lock did not exit with its stderr closed")
        .unwrap();
    out.status.code().unwrap_or(-1)
}

/// A closed stderr (`2>&-`, a dead log collector) loses the notes and errors written there, but
/// every command still ends as it would with stderr open: `eprintln!` panicked (exit 101) at the
/// first note, before an audit line or a release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stderr_changes_no_exit_code() {
    let server = TestServer::start();
    let mut raw = server.conn().await;
    let cases: [Vec<String>; 4] = [
        // "1 lock(s)" goes to stderr.
        args(&server, &["list"]),
        // A force-unlock's audit line goes to stderr.
        args(&server, &["force-unlock", "cli-stderr:1", "--yes"]),
        // An error: no server there.
        ["--url", "redis://127.0.0.1:1/", "inspect", "cli-stderr:1"]
            .map(String::from)
            .to_vec(),
        // A usage error (clap's own message).
        args(&server, &["inspect"]),
    ];
    for case in cases {
        let mut codes = Vec::new();
        for closed in [false, true] {
            // The same lock before each run (the force-unlock removes it).
            let _: () = redis::cmd("HSET")
                .arg("cli-stderr:1")
                .arg("0badc0de-0000-4000-8000-000000000000:1")
                .arg(1)
                .query_async(&mut raw)
                .await
                .unwrap();
            codes.push(if closed {
                exit_with_stderr_closed(&case).await
            } else {
                cli(&case).await.code
            });
        }
        assert_ne!(codes[1], 101, "{case:?}: panicked with stderr closed");
        assert_eq!(
            codes[0], codes[1],
            "{case:?}: another exit code with stderr closed"
        );
    }
}
