//! `redisson-lock`: the operator CLI of the `redisson-lock` crate.
//!
//! Inspects, lists, watches and force-unlocks Redisson-compatible locks on a standalone server,
//! a Redis Cluster or a Sentinel-managed master. See `docs/cli.md` for commands, flags, the JSON
//! fields and the exit codes.

mod change;
mod clients;
mod inspect;
mod list;
mod liveness;
mod output;
mod progress;
mod render;
mod run;
mod server;
mod subscribers;
mod synchronizers;
mod target;
mod unlock;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// Inspect and operate Redisson-compatible distributed locks on Redis.
#[derive(Parser)]
#[command(name = "redisson-lock", version, max_term_width = 100)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Where the deployment is, and how to print. No `Debug`: it holds the password
/// (`$REDIS_PASSWORD`) and may hold URLs with one; nothing may print it whole.
#[derive(Args)]
pub struct Global {
    /// Redis server URL (`redis://[user:password@]host:port[/db]`, `rediss://` for TLS). Keep
    /// passwords out of argv: use $REDIS_URL, --url-file, --password-file or $REDIS_PASSWORD.
    #[arg(
        long,
        global = true,
        env = "REDIS_URL",
        default_value = server::DEFAULT_URL,
        hide_env_values = true
    )]
    pub url: String,
    /// Redis Cluster seed node URLs (repeat the flag or separate with commas); replaces --url.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        value_delimiter = ',',
        conflicts_with = "sentinel"
    )]
    pub cluster: Vec<String>,
    /// Sentinel URLs (repeat the flag or separate with commas); needs --master.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        value_delimiter = ',',
        requires = "master"
    )]
    pub sentinel: Vec<String>,
    /// Name of the master monitored by the sentinels.
    #[arg(long, global = true, value_name = "NAME", requires = "sentinel")]
    pub master: Option<String>,
    /// TLS: trust this CA (PEM file) for rediss:// URLs instead of the system's CAs.
    #[arg(long, global = true, value_name = "FILE", env = "REDIS_TLS_CA")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// TLS: present this client certificate (PEM file; needs --tls-key), for mutual TLS.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// TLS: the client certificate's private key (PEM file).
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// TLS: accept any server certificate. INSECURE, for test set-ups only (a binary built with
    /// the feature `tls-insecure`).
    #[cfg(feature = "tls-insecure")]
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Read the server URL from this file (first line; it may carry the password); replaces
    /// --url and $REDIS_URL.
    #[arg(long, global = true, value_name = "FILE", env = "REDIS_URL_FILE")]
    pub url_file: Option<std::path::PathBuf>,
    /// Read the password from this file (first line) for every URL that has none.
    #[arg(long, global = true, value_name = "FILE", env = "REDIS_PASSWORD_FILE")]
    pub password_file: Option<std::path::PathBuf>,
    /// The password for every URL that has none (environment only, never a flag).
    #[arg(skip = std::env::var("REDIS_PASSWORD").ok())]
    pub password: Option<String>,
    /// Print JSON (stable field names, see docs/cli.md) instead of the human format.
    #[arg(long, global = true)]
    pub json: bool,
    /// The watchdog's lease (Redisson's lockWatchdogTimeout) for `run`'s hold; default 30s.
    #[arg(long, global = true, value_name = "DURATION", value_parser = duration)]
    pub watchdog_timeout: Option<Duration>,
    /// Tracing output on stderr: -v info, -vv debug, -vvv trace (RUST_LOG overrides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show a lock's kind, holders (with their connections), TTL, queue, token and waiters.
    Inspect {
        /// The lock name (the Redis key).
        name: String,
        /// Exit 0 when NAME is a held lock, 3 when it is not (missing, or not a lock).
        #[arg(long)]
        exit_status: bool,
    },
    /// List lock-like keys matching a SCAN pattern (every master of a cluster).
    List {
        /// SCAN MATCH pattern.
        #[arg(default_value = "*")]
        pattern: String,
        /// SCAN COUNT hint (keys examined per call; each page is read in a few pipelines).
        #[arg(long, default_value_t = 1000)]
        count: u32,
        /// Also list synchronizers and keys that do not look like locks (as kind `unknown`).
        #[arg(long)]
        all: bool,
        /// Stop after this many entries.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Progress on stderr even when it is not a terminal.
        #[arg(long, conflicts_with = "no_progress")]
        progress: bool,
        /// No progress on stderr, even on a terminal.
        #[arg(long)]
        no_progress: bool,
        /// Each holder on its own row with its client's connection (address, or `-`) and
        /// whether that client is connected (`live`, `orphan`, `unknown`).
        #[arg(long)]
        wide: bool,
        /// Only the locks whose holders' clients have no connection on any master (dead
        /// holders waiting out their lease); implies --wide's columns.
        #[arg(long)]
        orphans: bool,
    },
    /// Print a lock's unlock messages and state changes as they happen.
    Watch {
        /// The lock name.
        name: String,
        /// Stop after this long (`90s`, `5m`; a bare number is seconds; default: until Ctrl-C).
        #[arg(long = "for", value_name = "DURATION", value_parser = duration)]
        duration: Option<Duration>,
    },
    /// Delete a lock whoever holds it and wake its waiters, as Redisson's forceUnlock.
    ForceUnlock {
        /// The lock name.
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Remove the lock only while this holder (hash field `<uuid>:<id>`) holds it.
        #[arg(long, value_name = "FIELD")]
        owner: Option<String>,
        /// Append the audit line of each change to FILE too (it always goes to stderr).
        #[arg(long, value_name = "FILE", env = "REDISSON_LOCK_AUDIT_LOG")]
        audit_log: Option<std::path::PathBuf>,
    },
    /// Run a command while holding a lock, as flock(1) does on one machine (exit codes: docs/cli.md).
    Run(run::Args),
    /// Change a semaphore (RSemaphore).
    Semaphore {
        #[command(subcommand)]
        action: synchronizers::SemaphoreAction,
    },
    /// Change a permit-expirable semaphore (RPermitExpirableSemaphore).
    PermitSemaphore {
        #[command(subcommand)]
        action: synchronizers::PermitAction,
    },
    /// Count down or delete a count-down latch (RCountDownLatch).
    Latch {
        #[command(subcommand)]
        action: synchronizers::LatchAction,
    },
    /// Reset or delete a rate limiter (RRateLimiter).
    RateLimiter {
        #[command(subcommand)]
        action: synchronizers::RateLimiterAction,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// A duration: humantime (`1500ms`, `30s`, `5m`, `1h 30m`) or a bare number of seconds.
pub fn duration(s: &str) -> std::result::Result<Duration, String> {
    if let Ok(x) = s.trim().parse::<f64>() {
        return if x.is_finite() && (0.0..=1e9).contains(&x) {
            Ok(Duration::from_secs_f64(x))
        } else {
            Err(format!("`{s}` is not a duration between 0 and 1e9 seconds"))
        };
    }
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("`{s}` is not a duration (`30s`, `5m`, `1h 30m`): {e}"))
}

/// Exit code of `inspect --exit-status` when NAME is not a held lock.
pub const EXIT_NOT_LOCKED: u8 = 3;

/// An error for the user: printed on stderr, exit code 1.
#[derive(Debug)]
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

/// The CLI's result type.
pub type Result<T> = std::result::Result<T, Failure>;

fn main() -> ExitCode {
    // Usage errors exit with 2 (clap's default) before anything connects.
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // The built-in default URL is said in the output: no --url, no $REDIS_URL, no URL file,
    // no cluster, no sentinels.
    let default_url = matches.value_source("url") == Some(ValueSource::DefaultValue)
        && cli.global.url_file.is_none()
        && cli.global.cluster.is_empty()
        && cli.global.sentinel.is_empty();
    if let Command::Completions { shell } = cli.command {
        let mut command = Cli::command();
        // Into memory first: clap_complete panics on a failed write.
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut command, "redisson-lock", &mut script);
        return match output::out(&String::from_utf8_lossy(&script)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) if output::stdout_closed() => ExitCode::from(output::EXIT_STDOUT_CLOSED),
            Err(Failure(message)) => {
                crate::output::errln!("error: {message}");
                ExitCode::from(1)
            }
        };
    }
    verbosity(cli.global.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::output::errln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(dispatch(cli, default_url));
    // stdout closed under us (`| head`): end quietly, as a tool killed by SIGPIPE (see
    // `output::out` for why SIGPIPE itself stays ignored).
    if output::stdout_closed() {
        return ExitCode::from(output::EXIT_STDOUT_CLOSED);
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Failure(message)) => {
            crate::output::errln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

/// `-v`: the crate's and the CLI's info events on stderr; `-vv` debug; `-vvv` trace.
/// `RUST_LOG` (tracing-subscriber's filter syntax) replaces the default filter.
fn verbosity(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => return,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("redisson_lock={level},warn")));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// On stderr (stdout stays the command's): whether the server may evict lock keys, which loses
/// them for every client unseen; or that it could not be asked.
async fn eviction_warning(target: &target::Target) {
    match target.client.eviction_risk().await {
        Ok(Some(policy)) => crate::output::errln!(
            "warning: the server may evict keys (maxmemory is set, maxmemory-policy {policy}): \
             a lock key evicted is lost for every client without anyone being told"
        ),
        Ok(None) => {}
        Err(e) => {
            crate::output::errln!(
                "note: cannot tell whether the server may evict lock keys (CONFIG GET: {e})"
            )
        }
    }
}

/// Runs the command; `Ok`: the exit code.
/// `default_url`: the URL is the built-in default.
async fn dispatch(cli: Cli, default_url: bool) -> Result<u8> {
    // The commands that only read connect as a read-only client: an on-call user allowed
    // only read commands (no `SCRIPT LOAD`) can run them.
    let reads = matches!(
        cli.command,
        Command::Inspect { .. } | Command::List { .. } | Command::Watch { .. }
    );
    let target = target::Target::connect(&cli.global, reads, default_url).await?;
    let json = cli.global.json;
    // Say where: the first line of every text output (`watch` timestamps its own; `run`'s
    // stdout is the command's).
    if !json && !matches!(cli.command, Command::Watch { .. } | Command::Run(_)) {
        output::line(&target.server.line())?;
    }
    if matches!(cli.command, Command::Inspect { .. } | Command::List { .. }) {
        eviction_warning(&target).await;
    }
    match cli.command {
        Command::Inspect { name, exit_status } => {
            // The command layer joins the two: `inspect` reads, `render` formats.
            let found = inspect::inspect(&target, &name).await?;
            if json {
                output::print_json(&server::WithServer {
                    server: &target.server,
                    doc: &found,
                })?;
            } else {
                output::out(&render::inspection(&found))?;
            }
            let held = found.kind.is_some_and(inspect::Kind::is_lock) && !found.holders.is_empty();
            Ok(if exit_status && !held {
                EXIT_NOT_LOCKED
            } else {
                0
            })
        }
        Command::List {
            pattern,
            count,
            all,
            limit,
            progress,
            no_progress,
            wide,
            orphans,
        } => {
            let options = list::Options {
                pattern,
                count,
                all,
                limit,
                progress: if progress {
                    Some(true)
                } else if no_progress {
                    Some(false)
                } else {
                    None
                },
            };
            if wide || orphans {
                liveness::run(&target, &options, orphans, json).await?;
            } else {
                list::run(&target, &options, json).await?;
            }
            Ok(0)
        }
        Command::Watch { name, duration } => {
            watch::run(&target, &name, duration, json).await.map(|()| 0)
        }
        Command::ForceUnlock {
            name,
            yes,
            owner,
            audit_log,
        } => {
            let request = unlock::Request {
                name: &name,
                yes,
                owner: owner.as_deref(),
                audit_log: audit_log.as_deref(),
                json,
            };
            unlock::run(&target, &request).await
        }
        Command::Run(args) => run::run(&target, args).await,
        Command::Semaphore { action } => synchronizers::semaphore(&target, action, json).await,
        Command::PermitSemaphore { action } => {
            synchronizers::permit_semaphore(&target, action, json).await
        }
        Command::Latch { action } => synchronizers::latch(&target, action, json).await,
        Command::RateLimiter { action } => synchronizers::rate_limiter(&target, action, json).await,
        Command::Completions { .. } => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_humantime_or_seconds() {
        assert_eq!(duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("2.5"), Ok(Duration::from_millis(2500)));
        assert!(duration("soon").unwrap_err().contains("not a duration"));
        assert!(duration("-1").is_err());
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
