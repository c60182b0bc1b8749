//! `run NAME [--wait D] [--lease D] [--timeout D] -- CMD [ARGS]`: flock(1) for a fleet. Takes the
//! lock (the watchdog renews it while the command runs, unless `--lease`), runs the command with
//! this process's stdin, stdout and stderr, passes its exit status through and releases the lock
//! after. The exit codes are in docs/cli.md, "Exit codes".

use std::time::Duration;

use redisson_lock::RLockGuard;

use crate::target::Target;
use crate::{duration, Failure, Result};

/// Exit code when the lock was not taken (`--conflict-exit-code` changes it; sysexits'
/// EX_TEMPFAIL: try again later).
pub const EXIT_NOT_TAKEN: u8 = 75;
/// Exit code when the hold was lost while the command ran and `--kill-on-lost` stopped it.
pub const EXIT_LOST: u8 = 76;
/// Exit code when `--timeout` stopped the command (as timeout(1)).
pub const EXIT_TIMEOUT: u8 = 124;
/// A timer that never fires in practice (a disarmed kill timer).
const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
/// The command exists but cannot be run (as a shell).
pub const EXIT_CANNOT_RUN: u8 = 126;
/// The command was not found (as a shell).
pub const EXIT_NOT_FOUND: u8 = 127;

/// The flags of `run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lock name (an RLock: Java's `getLock(NAME)` excludes the same holders).
    pub name: String,
    /// How long to wait for the lock (`30s`, `2m`; default: for ever).
    #[arg(long, short = 'w', value_name = "DURATION", value_parser = duration)]
    pub wait: Option<Duration>,
    /// Do not wait: give up at once when the lock is held (as `--wait 0`).
    #[arg(long, short = 'n', conflicts_with = "wait")]
    pub nonblock: bool,
    /// A fixed lease: the hold ends after it even if the command still runs (default: the
    /// watchdog renews the hold until the command exits).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub lease: Option<Duration>,
    /// Stop the command when it runs longer than this (SIGTERM, then SIGKILL after
    /// --kill-after); exit 124.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub timeout: Option<Duration>,
    /// How long a command told to stop (--timeout, --kill-on-lost) has before SIGKILL.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "10s")]
    pub kill_after: Duration,
    /// Stop the command when the hold is lost while it runs (exit 76); without it, the loss
    /// is reported on stderr and the command goes on.
    #[arg(long)]
    pub kill_on_lost: bool,
    /// The exit code when the lock was not taken (default 75).
    #[arg(long, short = 'E', value_name = "CODE", default_value_t = EXIT_NOT_TAKEN)]
    pub conflict_exit_code: u8,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `run`: the exit code to leave with.
pub async fn run(target: &Target, args: Args) -> Result<u8> {
    let lock = target.client.get_lock(&args.name);
    let mut signals = Signals::new()?;
    let wait = if args.nonblock {
        Some(Duration::ZERO)
    } else {
        args.wait
    };
    let acquire = async {
        match (wait, args.lease) {
            (None, None) => lock.lock().await.map(Some),
            (None, Some(lease)) => lock.lock_with_lease(lease).await.map(Some),
            (Some(wait), None) => lock.try_lock_for(wait).await,
            (Some(wait), Some(lease)) => lock.try_lock_with_lease(wait, lease).await,
        }
    };
    let taken = tokio::select! {
        r = acquire => r?,
        sig = signals.recv() => {
            crate::output::errln!("redisson-lock: {} while waiting for `{}`: not taken", name(sig), args.name);
            return Ok(128u8.saturating_add(sig as u8));
        }
    };
    let Some(guard) = taken else {
        crate::output::errln!(
            "redisson-lock: `{}` is held by another owner: not taken{}",
            args.name,
            wait.map(|w| format!(" (waited {})", humantime::format_duration(w)))
                .unwrap_or_default()
        );
        return Ok(args.conflict_exit_code);
    };
    tracing::info!(name = %args.name, lease = ?args.lease, "lock taken; running the command");
    let mut child = match tokio::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            crate::output::errln!("redisson-lock: cannot run `{}`: {e}", args.command[0]);
            release(guard, &args.name, false).await;
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                EXIT_NOT_FOUND
            } else {
                EXIT_CANNOT_RUN
            });
        }
    };
    let pid = child.id();
    let deadline = async {
        match args.timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let kill = tokio::time::sleep(FAR);
    tokio::pin!(kill);
    let mut stopped: Option<u8> = None;
    let mut lost = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            () = &mut deadline, if stopped.is_none() => {
                crate::output::errln!(
                    "redisson-lock: the command ran past --timeout {}: stopping it",
                    humantime::format_duration(args.timeout.unwrap_or_default())
                );
                send(pid, SIGTERM);
                stopped = Some(EXIT_TIMEOUT);
                kill.as_mut().reset(tokio::time::Instant::now() + args.kill_after);
            }
            () = guard.lost(), if !lost => {
                lost = true;
                crate::output::errln!(
                    "redisson-lock: lost the hold of `{}` while the command runs: another owner may take it{}",
                    args.name,
                    if args.kill_on_lost { "; stopping the command" } else { "" }
                );
                if args.kill_on_lost && stopped.is_none() {
                    send(pid, SIGTERM);
                    stopped = Some(EXIT_LOST);
                    kill.as_mut().reset(tokio::time::Instant::now() + args.kill_after);
                }
            }
            () = &mut kill => {
                crate::output::errln!("redisson-lock: the command did not stop: killing it");
                send(pid, SIGKILL);
                kill.as_mut().reset(tokio::time::Instant::now() + FAR);
            }
            sig = signals.recv() => {
                tracing::info!(signal = name(sig), "forwarding the signal to the command");
                send(pid, sig);
            }
        }
    };
    release(guard, &args.name, lost).await;
    Ok(stopped.unwrap_or_else(|| exit_code(status)))
}

/// Releases the hold; a hold already gone is reported (once), never an error of the command.
async fn release(guard: RLockGuard, name: &str, reported: bool) {
    match guard.unlock().await {
        Ok(()) => tracing::info!(name, "lock released"),
        Err(e) if e.is_lease_lost() => {
            if !reported {
                crate::output::errln!(
                    "redisson-lock: the hold of `{name}` was lost before the command ended"
                );
            }
        }
        Err(e) => crate::output::errln!(
            "redisson-lock: could not release `{name}`: {e} (its lease ends it)"
        ),
    }
}

/// A child's status as a shell reports it: its code, or 128 + the signal that ended it.
fn exit_code(status: std::process::ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(1);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return 128u8.saturating_add(sig as u8);
        }
    }
    1
}

#[cfg(unix)]
const SIGTERM: i32 = libc::SIGTERM;
#[cfg(unix)]
const SIGKILL: i32 = libc::SIGKILL;
#[cfg(not(unix))]
const SIGTERM: i32 = 15;
#[cfg(not(unix))]
const SIGKILL: i32 = 9;

/// Sends `sig` to the child (nothing once it has been reaped: `pid` is then `None`).
fn send(pid: Option<u32>, sig: i32) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    #[cfg(unix)]
    // SAFETY: kill(2) with our own child's pid; it has no memory effects.
    unsafe {
        libc::kill(pid, sig);
    }
    #[cfg(not(unix))]
    let _ = (pid, sig);
}

fn name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// SIGTERM, SIGINT and SIGHUP, received rather than fatal while `run` lives.
struct Signals {
    #[cfg(unix)]
    streams: Vec<(i32, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn new() -> Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut streams = Vec::new();
            for (n, kind) in [
                (15, SignalKind::terminate()),
                (2, SignalKind::interrupt()),
                (1, SignalKind::hangup()),
            ] {
                streams.push((n, signal(kind).map_err(Failure::from)?));
            }
            Ok(Signals { streams })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next signal's number.
    async fn recv(&mut self) -> i32 {
        #[cfg(unix)]
        {
            let waits = self.streams.iter_mut().map(|(n, s)| {
                let n = *n;
                Box::pin(async move {
                    s.recv().await;
                    n
                })
            });
            futures_util::future::select_all(waits).await.0
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            2
        }
    }
}
