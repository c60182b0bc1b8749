//! The operator CLI (`redisson-lock`, feature `cli`): the real binary run against real servers,
//! on locks held by this crate (and, for `list`, hashes written the way a Java client writes
//! them). Waits are event-driven with generous bounds; nothing asserts on elapsed time.
//!
//! One file per command; this module holds the shared helpers (running the binary, its
//! arguments, a running `watch`'s lines).

mod eviction;
mod force_unlock;
mod holders;
mod inspect;
mod kinds;
mod list;
mod options;
mod orphans;
mod pipe;
mod read_only;
mod run;
mod server;
mod synchronizers;
#[cfg(feature = "tls")]
mod tls;
mod topology;
mod watch;
mod watch_restart;

use std::process::Stdio;
use std::time::Duration;

use crate::support::*;
use redisson_lock::Client;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_redisson-lock");
/// Generous bound for anything event-driven (a wake-up, a line of output).
pub(crate) const WAIT: Duration = Duration::from_secs(20);

pub(crate) struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub(crate) fn command(args: &[String]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args)
        .env_remove("REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs the CLI to completion; `stdin`: what to type (else no input at all).
pub(crate) async fn cli_in(args: &[String], stdin: Option<&str>) -> Out {
    let mut cmd = command(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().expect("run redisson-lock");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).await.unwrap();
        drop(pipe);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("redisson-lock did not exit")
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) async fn cli(args: &[String]) -> Out {
    cli_in(args, None).await
}

/// Runs the CLI with no credentials from this process's environment (`REDIS_PASSWORD`, its
/// file and URL-file variables removed), only those in `env`.
pub(crate) async fn cli_env(args: &[String], env: &[(&str, &str)]) -> Out {
    let mut cmd = command(args);
    cmd.env_remove("REDIS_PASSWORD")
        .env_remove("REDIS_PASSWORD_FILE")
        .env_remove("REDIS_URL_FILE")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("redisson-lock did not exit")
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) fn args(server: &TestServer, rest: &[&str]) -> Vec<String> {
    let mut v = vec!["--url".to_owned(), server.url()];
    v.extend(rest.iter().map(|s| s.to_string()));
    v
}

/// Runs with `--json`, expects exit 0, parses stdout.
pub(crate) async fn json(args: Vec<String>) -> Value {
    let mut args = args;
    args.insert(0, "--json".to_owned());
    let out = cli(&args).await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// Runs with `--json` and `stdin` (as [`cli_in`]), expects exit `code`, parses stdout.
pub(crate) async fn json_in(args: Vec<String>, stdin: Option<&str>, code: i32) -> Value {
    let mut args = args;
    args.insert(0, "--json".to_owned());
    let out = cli_in(&args, stdin).await;
    assert_eq!(out.code, code, "stderr: {}", out.stderr);
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// The entries of a `list --json` document: the array opens with `{"server": {...}}` (where
/// it looked), the entries follow.
pub(crate) fn listed(v: &Value) -> Vec<Value> {
    let all = v.as_array().unwrap_or_else(|| panic!("not an array: {v}"));
    assert!(all[0]["server"]["address"].is_string(), "{v}");
    all[1..].to_vec()
}

pub(crate) fn lock_channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// Waits until `channel` has `n` subscribers on `server`.
pub(crate) async fn wait_subscribers(server: &TestServer, channel: &str, n: i64) {
    let ok = eventually(WAIT, || async { numsub_on(server, channel).await == n }).await;
    assert!(ok, "{channel} never had {n} subscriber(s)");
}

/// `name` held by one client (kept alive in the tuple) and awaited by another client's task,
/// which is parked on the lock's channel when this returns.
pub(crate) async fn held_with_waiter(
    server: &TestServer,
    name: &str,
) -> (
    Client,
    redisson_lock::LockGuard<redisson_lock::Reentrant>,
    tokio::task::JoinHandle<redisson_lock::Result<()>>,
) {
    let holder = server.client().await;
    let guard = holder.get_lock(name).lock().await.unwrap();
    let lock = server.client().await.get_lock(name);
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) });
    wait_subscribers(server, &lock_channel(name), 1).await;
    (holder, guard, waiter)
}

/// Lines of a running `watch`, read as they come.
pub(crate) struct Watch {
    pub(crate) child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pub(crate) seen: Vec<String>,
}

impl Watch {
    /// The process must exit by itself, successfully, within the test's bound.
    async fn exits_cleanly(&mut self) {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("watch did not exit")
            .unwrap();
        assert!(status.success(), "{status:?}");
    }

    /// Ctrl-C, as a terminal sends it (to our own child, by its pid): it must exit cleanly.
    pub(crate) async fn interrupt_exits_cleanly(&mut self) {
        let pid = self.child.id().unwrap().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status();
        assert!(sent.unwrap().success());
        self.exits_cleanly().await;
    }

    pub(crate) fn start(args: &[String]) -> Watch {
        Watch::start_with_env(args, &[])
    }

    /// [`start`](Watch::start) with these environment variables set.
    pub(crate) fn start_with_env(args: &[String], env: &[(&str, &str)]) -> Watch {
        let mut cmd = command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdin(Stdio::null()).spawn().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Watch {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads until a line contains `needle`.
    pub(crate) async fn until(&mut self, needle: &str) -> String {
        let read = async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                self.seen.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            panic!("watch ended before printing `{needle}`: {:?}", self.seen)
        };
        tokio::time::timeout(WAIT, read)
            .await
            .unwrap_or_else(|_| panic!("no `{needle}` in watch output"))
    }
}
